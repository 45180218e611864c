import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  createPublicClient,
  createWalletClient,
  defineChain,
  encodeFunctionData,
  http,
  type Abi,
  type Address,
  type Hex,
  type PublicClient,
  type WalletClient,
  type Chain,
  type Transport,
  type Account,
} from 'viem';
import { generatePrivateKey, mnemonicToAccount, privateKeyToAccount, type LocalAccount, type PrivateKeyAccount } from 'viem/accounts';
import { freePort } from './gateway.ts';

/**
 * A real local EVM chain for the billing tests: the anvil binary that ships in the @foundry-rs/anvil npm
 * package (its per-platform optional dependency), on a free loopback port, mining one block per
 * transaction. Tests move confirmations with `anvil_mine`.
 *
 * The test token is compiled from test/fixtures/TestUSDT.sol by test/fixtures/build-test-contracts.ts
 * (solc from npm, pinned) into test/fixtures/test-contracts.json, which the tests deploy. One test
 * recompiles the source and checks that the committed bytecode is what it produces.
 */

const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures');
export const CONTRACTS_SOURCE = join(FIXTURES, 'TestUSDT.sol');
export const CONTRACTS_ARTIFACT = join(FIXTURES, 'test-contracts.json');
/** The compiler settings the artifact was built with; the rebuild check uses the same. */
export const SOLC_SETTINGS = {
  optimizer: { enabled: true, runs: 200 },
  evmVersion: 'cancun',
  metadata: { bytecodeHash: 'none' },
  outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } },
} as const;

export interface ContractArtifact {
  abi: Abi;
  bytecode: Hex;
}
export interface ContractsArtifact {
  compiler: string;
  source_sha256: string;
  contracts: { TestUSDT: ContractArtifact; Forwarder: ContractArtifact };
}

/** Compiles the fixture source with the pinned solc (slow: loads the compiler, about a second or two). */
export async function compileTestContracts(): Promise<{ compiler: string; contracts: Record<string, ContractArtifact> }> {
  const solc = (await import('solc')).default;
  const input = { language: 'Solidity', sources: { 'TestUSDT.sol': { content: readFileSync(CONTRACTS_SOURCE, 'utf8') } }, settings: SOLC_SETTINGS };
  const out = JSON.parse(solc.compile(JSON.stringify(input))) as {
    errors?: Array<{ severity: string; formattedMessage: string }>;
    contracts: Record<string, Record<string, { abi: Abi; evm: { bytecode: { object: string } } }>>;
  };
  const errors = (out.errors ?? []).filter((e) => e.severity === 'error');
  if (errors.length) throw new Error(`solc: ${errors.map((e) => e.formattedMessage).join('\n')}`);
  const contracts: Record<string, ContractArtifact> = {};
  for (const [name, c] of Object.entries(out.contracts['TestUSDT.sol'] ?? {})) contracts[name] = { abi: c.abi, bytecode: `0x${c.evm.bytecode.object}` };
  return { compiler: solc.version() as string, contracts };
}

export function loadTestContracts(): ContractsArtifact {
  return JSON.parse(readFileSync(CONTRACTS_ARTIFACT, 'utf8')) as ContractsArtifact;
}

/** The anvil binary from the platform package that @foundry-rs/anvil installs as an optional dependency. */
export function anvilBinary(): string {
  const arch = { x64: 'amd64', arm64: 'arm64' }[process.arch as string];
  const platform = process.platform;
  if (!arch) throw new Error(`anvil: unsupported architecture ${process.arch}`);
  const require = createRequire(import.meta.url);
  const pkg = require.resolve(`@foundry-rs/anvil-${platform}-${arch}/package.json`);
  return join(dirname(pkg), 'bin', platform === 'win32' ? 'anvil.exe' : 'anvil');
}

const MNEMONIC = 'test test test test test test test test test test test junk';

export interface TestChain {
  rpcUrl: string;
  chainId: number;
  chain: Chain;
  pub: PublicClient;
  /** anvil's funded dev accounts (index 0-9). */
  accounts: LocalAccount[];
  wallet(account: LocalAccount): WalletClient<Transport, Chain, Account>;
  /** Mines `n` empty blocks. */
  mine(n: number): Promise<void>;
  blockNumber(): Promise<bigint>;
  /** A fresh wallet with 1 ETH for gas (anvil_setBalance); it can also sign in to the gateway. */
  newWallet(): Promise<PrivateKeyAccount>;
  stop(): Promise<void>;
}

/** Starts anvil on a free loopback port (instant mining: one block per transaction). */
export async function startChain(opts: { chainId?: number; port?: number } = {}): Promise<TestChain> {
  const chainId = opts.chainId ?? 31337;
  const port = opts.port ?? (await freePort());
  const child: ChildProcess = spawn(anvilBinary(), ['--host', '127.0.0.1', '--port', String(port), '--chain-id', String(chainId), '--accounts', '10', '--silent'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (b: Buffer) => (stderr += b.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const rpcUrl = `http://127.0.0.1:${port}`;
  const chain = defineChain({ id: chainId, name: 'anvil', nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [rpcUrl] } } });
  const pub = createPublicClient({ chain, transport: http(rpcUrl, { retryCount: 0 }) }) as PublicClient;
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    await Promise.race([exited, new Promise((r) => setTimeout(r, 3000))]);
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  };
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`anvil exited (${child.exitCode}): ${stderr}`);
    try {
      if ((await pub.getChainId()) === chainId) break;
    } catch {
      /* not listening yet */
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`anvil did not answer on ${rpcUrl}: ${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const accounts = Array.from({ length: 10 }, (_, i) => mnemonicToAccount(MNEMONIC, { addressIndex: i }));
  return {
    rpcUrl,
    chainId,
    chain,
    pub,
    accounts,
    wallet: (account) => createWalletClient({ account, chain, transport: http(rpcUrl, { retryCount: 0 }) }),
    async mine(n) {
      await pub.request({ method: 'anvil_mine' as never, params: [`0x${n.toString(16)}`] as never });
    },
    blockNumber: () => pub.getBlockNumber({ cacheTime: 0 }),
    async newWallet() {
      const account = privateKeyToAccount(generatePrivateKey());
      await pub.request({ method: 'anvil_setBalance' as never, params: [account.address, '0xde0b6b3a7640000'] as never });
      return account;
    },
    stop,
  };
}

/** A deployed TestUSDT (6 decimals) with helpers that send real transactions. */
export interface TestToken {
  address: Address;
  mint(to: Address, amount: bigint): Promise<Hex>;
  /** Sends `transfer(to, amount)` from `from`; waits for the receipt. */
  transfer(from: LocalAccount, to: Address, amount: bigint): Promise<Hex>;
  transferTwo(from: LocalAccount, to1: Address, amount1: bigint, to2: Address, amount2: bigint): Promise<Hex>;
  approve(from: LocalAccount, spender: Address, amount: bigint): Promise<Hex>;
  /** A transfer the token reverts (more than the balance), mined with a fixed gas limit: a failed receipt. */
  failingTransfer(from: LocalAccount, to: Address, amount: bigint): Promise<Hex>;
  balanceOf(who: Address): Promise<bigint>;
}

async function sendAndWait(c: TestChain, from: LocalAccount, to: Address, data: Hex, gas?: bigint): Promise<Hex> {
  const hash = await c.wallet(from).sendTransaction({ to, data, ...(gas ? { gas } : {}) });
  await c.pub.waitForTransactionReceipt({ hash, pollingInterval: 50 });
  return hash;
}

async function deploy(c: TestChain, art: ContractArtifact, args: unknown[]): Promise<Address> {
  const hash = await c.wallet(c.accounts[0]!).deployContract({ abi: art.abi, bytecode: art.bytecode, args });
  const r = await c.pub.waitForTransactionReceipt({ hash, pollingInterval: 50 });
  if (r.status !== 'success' || !r.contractAddress) throw new Error('deploy failed');
  return r.contractAddress;
}

export async function deployToken(c: TestChain, name = 'Tether USD', symbol = 'USDT'): Promise<TestToken> {
  const art = loadTestContracts().contracts.TestUSDT;
  const address = await deploy(c, art, [name, symbol]);
  const data = (functionName: string, args: unknown[]) => encodeFunctionData({ abi: art.abi, functionName, args });
  return {
    address,
    mint: (to, amount) => sendAndWait(c, c.accounts[0]!, address, data('mint', [to, amount])),
    transfer: (from, to, amount) => sendAndWait(c, from, address, data('transfer', [to, amount])),
    transferTwo: (from, to1, a1, to2, a2) => sendAndWait(c, from, address, data('transferTwo', [to1, a1, to2, a2])),
    approve: (from, spender, amount) => sendAndWait(c, from, address, data('approve', [spender, amount])),
    failingTransfer: (from, to, amount) => sendAndWait(c, from, address, data('transfer', [to, amount]), 200_000n),
    balanceOf: async (who) => (await c.pub.readContract({ address, abi: art.abi, functionName: 'balanceOf', args: [who] })) as bigint,
  };
}

/** A forwarder contract: `pay(token, to, value)` moves the caller's approved tokens; the tx's `to` is the forwarder. */
export async function deployForwarder(c: TestChain): Promise<{ address: Address; pay(from: LocalAccount, token: Address, to: Address, amount: bigint): Promise<Hex> }> {
  const art = loadTestContracts().contracts.Forwarder;
  const address = await deploy(c, art, []);
  return {
    address,
    pay: (from, token, to, amount) => sendAndWait(c, from, address, encodeFunctionData({ abi: art.abi, functionName: 'pay', args: [token, to, amount] })),
  };
}

/** Sends plain ether (a transaction with no token log at all). */
export async function sendEther(c: TestChain, from: LocalAccount, to: Address, value: bigint): Promise<Hex> {
  const hash = await c.wallet(from).sendTransaction({ to, value });
  await c.pub.waitForTransactionReceipt({ hash, pollingInterval: 50 });
  return hash;
}
