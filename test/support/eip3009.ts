import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { encodeFunctionData, type Abi, type Address, type Hex } from 'viem';
import { SOLC_SETTINGS, type TestChain } from './chain.ts';

/**
 * An EIP-3009 token (test/fixtures/Eip3009Token.sol) compiled with the pinned solc from npm when a test
 * starts, and deployed on a local anvil chain: what a buyer pays a marketplace seller in, through an x402
 * `exact` payment (a signed transferWithAuthorization the gateway submits as facilitator).
 */
const SOURCE = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'Eip3009Token.sol');

let compiled: { abi: Abi; bytecode: Hex } | undefined;

export async function compileEip3009Token(): Promise<{ abi: Abi; bytecode: Hex }> {
  if (compiled) return compiled;
  const solc = (await import('solc')).default;
  const input = { language: 'Solidity', sources: { 'Eip3009Token.sol': { content: readFileSync(SOURCE, 'utf8') } }, settings: SOLC_SETTINGS };
  const out = JSON.parse(solc.compile(JSON.stringify(input))) as {
    errors?: Array<{ severity: string; formattedMessage: string }>;
    contracts: Record<string, Record<string, { abi: Abi; evm: { bytecode: { object: string } } }>>;
  };
  const errors = (out.errors ?? []).filter((e) => e.severity === 'error');
  if (errors.length) throw new Error(`solc: ${errors.map((e) => e.formattedMessage).join('\n')}`);
  const c = out.contracts['Eip3009Token.sol']!['Eip3009Token']!;
  compiled = { abi: c.abi, bytecode: `0x${c.evm.bytecode.object}` };
  return compiled;
}

export interface Eip3009Token {
  address: Address;
  name: string;
  version: string;
  mint(to: Address, amount: bigint): Promise<void>;
  balanceOf(who: Address): Promise<bigint>;
  authorizationState(who: Address, nonce: Hex): Promise<boolean>;
}

/** Deploys the token (EIP-712 domain: `name`, `version`, the chain's id, its address) from anvil's first account. */
export async function deployEip3009Token(c: TestChain, name = 'USD Coin', version = '2'): Promise<Eip3009Token> {
  const art = await compileEip3009Token();
  const deployer = c.accounts[0]!;
  const hash = await c.wallet(deployer).deployContract({ abi: art.abi, bytecode: art.bytecode, args: [name, version] });
  const r = await c.pub.waitForTransactionReceipt({ hash, pollingInterval: 50 });
  if (r.status !== 'success' || !r.contractAddress) throw new Error('deploy failed');
  const address = r.contractAddress;
  const read = (functionName: string, args: unknown[]) => c.pub.readContract({ address, abi: art.abi, functionName, args });
  return {
    address,
    name,
    version,
    async mint(to, amount) {
      const tx = await c.wallet(deployer).sendTransaction({ to: address, data: encodeFunctionData({ abi: art.abi, functionName: 'mint', args: [to, amount] }) });
      await c.pub.waitForTransactionReceipt({ hash: tx, pollingInterval: 50 });
    },
    balanceOf: async (who) => (await read('balanceOf', [who])) as bigint,
    authorizationState: async (who, nonce) => (await read('authorizationState', [who, nonce])) as boolean,
  };
}
