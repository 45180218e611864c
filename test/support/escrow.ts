import { readFileSync } from 'node:fs';
import { BaseError, decodeErrorResult, encodeFunctionData, type Abi, type Address, type Hex } from 'viem';
import type { LocalAccount } from 'viem/accounts';
import { SOLC_SETTINGS, type TestChain } from './chain.ts';

/**
 * The reference escrow (contracts/escrow/ReceiptEscrow.sol), compiled from the committed source with the
 * pinned solc (npm) and the test contracts' settings, deployed on a test chain with helpers that send real
 * transactions.
 */

export const ESCROW_SOURCE = new URL('../../contracts/escrow/ReceiptEscrow.sol', import.meta.url);

export async function compileEscrow(): Promise<{ abi: Abi; bytecode: Hex; warnings: string[] }> {
  const solc = (await import('solc')).default;
  const input = { language: 'Solidity', sources: { 'ReceiptEscrow.sol': { content: readFileSync(ESCROW_SOURCE, 'utf8') } }, settings: SOLC_SETTINGS };
  const out = JSON.parse(solc.compile(JSON.stringify(input))) as {
    errors?: Array<{ severity: string; formattedMessage: string }>;
    contracts: Record<string, Record<string, { abi: Abi; evm: { bytecode: { object: string } } }>>;
  };
  const errors = (out.errors ?? []).filter((e) => e.severity === 'error');
  if (errors.length) throw new Error(`solc: ${errors.map((e) => e.formattedMessage).join('\n')}`);
  const c = out.contracts['ReceiptEscrow.sol']!.ReceiptEscrow!;
  return { abi: c.abi, bytecode: `0x${c.evm.bytecode.object}`, warnings: (out.errors ?? []).map((e) => e.formattedMessage) };
}

export interface Escrow {
  address: Address;
  abi: Abi;
  deposit(from: LocalAccount, t: { jobId: string; jobField: string; kind: string; payee: Address; signer: Address; amount: bigint }): Promise<void>;
  /** Sends `data` (a claim call) from `from` with a fixed gas limit, so a reverting call is mined too. */
  send(from: LocalAccount, data: Hex): Promise<{ status: 'success' | 'reverted'; gasUsed: bigint }>;
  /** The custom error a call to the escrow reverts with (eth_call), or null when it would succeed. */
  revertOf(from: LocalAccount, data: Hex): Promise<{ name: string; args: readonly unknown[] } | null>;
  read<T>(functionName: string, args: unknown[]): Promise<T>;
}

export async function deployEscrow(c: TestChain, deployer: LocalAccount): Promise<Escrow> {
  const { abi, bytecode } = await compileEscrow();
  const hash = await c.wallet(deployer).deployContract({ abi, bytecode, args: [] });
  const r = await c.pub.waitForTransactionReceipt({ hash, pollingInterval: 50 });
  if (r.status !== 'success' || !r.contractAddress) throw new Error('escrow deploy failed');
  const address = r.contractAddress;
  return {
    address,
    abi,
    async deposit(from, t) {
      const data = encodeFunctionData({ abi, functionName: 'deposit', args: [t.jobId, t.jobField, t.kind, t.payee, t.signer] });
      const tx = await c.wallet(from).sendTransaction({ to: address, data, value: t.amount });
      const rc = await c.pub.waitForTransactionReceipt({ hash: tx, pollingInterval: 50 });
      if (rc.status !== 'success') throw new Error(`deposit for ${t.jobId} reverted`);
    },
    async send(from, data) {
      const tx = await c.wallet(from).sendTransaction({ to: address, data, gas: 1_000_000n });
      const rc = await c.pub.waitForTransactionReceipt({ hash: tx, pollingInterval: 50 });
      return { status: rc.status, gasUsed: rc.gasUsed };
    },
    async revertOf(from, data) {
      try {
        await c.pub.call({ account: from, to: address, data });
        return null;
      } catch (e) {
        const raw = e instanceof BaseError ? (e.walk((x) => typeof (x as { data?: unknown }).data === 'string') as { data?: Hex } | null) : null;
        if (!raw?.data) throw e;
        const d = decodeErrorResult({ abi, data: raw.data });
        return { name: d.errorName, args: d.args ?? [] };
      }
    },
    read: async <T,>(functionName: string, args: unknown[]) => (await c.pub.readContract({ address, abi, functionName, args })) as T,
  };
}
