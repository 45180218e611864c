import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { deployToken, startChain, type TestChain, type TestToken } from './support/chain.ts';
import { WallClock, expectOneLineError, secretFile, svc as runSvc, type CliRun } from './support/cli.ts';

/**
 * `svc deposit` and `svc balance` against a real local chain (anvil from npm) with a real ERC-20 (6 decimals):
 * the signed-in wallet sends USDT to the treasury, then credits it through the CLI.
 */
const CONFIRMATIONS = 2;
let chain: TestChain;
let usdt: TestToken;
let fake: TestToken;
let t: TestGateway;
let treasury: Address;
let tmp: string;
const key = generatePrivateKey();
const wallet = privateKeyToAccount(key);

beforeAll(async () => {
  chain = await startChain();
  [usdt, fake] = [await deployToken(chain), await deployToken(chain, 'Fake Tether', 'USDT')];
  treasury = (await chain.newWallet()).address;
  t = await startTestGateway({
    clock: new WallClock(),
    env: {
      SVC_TREASURY_ADDRESS: treasury,
      SVC_CHAINS: JSON.stringify([{ name: 'anvil', chain_id: chain.chainId, rpc_url: chain.rpcUrl, usdt: usdt.address, decimals: 6, confirmations: CONFIRMATIONS, min_deposit_micro_usd: 10_000 }]),
    },
  });
  tmp = mkdtempSync(join(tmpdir(), 'svc-cli-deposit-'));
  await chain.pub.request({ method: 'anvil_setBalance' as never, params: [wallet.address, '0xde0b6b3a7640000'] as never });
  const login = await svc(['login', '--key-file', secretFile(tmp, 'wallet.key', key)]);
  expect(login.code, login.stderr).toBe(0);
});
afterAll(async () => {
  await t?.close();
  await chain?.stop();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

const svc = (args: string[]): Promise<CliRun> => runSvc(args, { dir: join(tmp, 'config'), url: t.url });

describe('svc deposit', () => {
  it('reports a transfer pending until its confirmations, then credits it once; svc balance shows it', async () => {
    await usdt.mint(wallet.address, 5_000_000n);
    const tx = await usdt.transfer(wallet, treasury, 2_500_000n);

    const pending = await svc(['deposit', '--chain', 'anvil', '--tx', tx]);
    expect(pending.code, pending.stderr).toBe(0);
    expect(pending.stdout).toMatch(new RegExp(`^Pending: 1 of ${CONFIRMATIONS} confirmations on anvil; nothing credited yet\\. Run the same command again later\\.$`, 'm'));
    expect(pending.stderr).toBe(`verifying ${tx} on anvil\n`);

    await chain.mine(CONFIRMATIONS);
    const credited = await svc(['deposit', '--chain', 'anvil', '--tx', tx]);
    expect(credited.code, credited.stderr).toBe(0);
    expect(credited.stdout).toMatch(new RegExp(`^Credited \\$2\\.50 from ${tx} on anvil\\.$`, 'm'));
    expect(credited.stdout).toMatch(new RegExp(`^from\\s+${wallet.address}$`, 'mi'));

    const again = await svc(['deposit', '--json', '--chain', 'anvil', '--tx', tx]);
    expect(JSON.parse(again.stdout)).toMatchObject({ status: 'credited', tx_hash: tx, amount: '2500000', amount_micro_usd: 2_500_000 });
    const balance = JSON.parse((await svc(['balance', '--json'])).stdout) as { balance_micro_usd: number };
    expect(balance.balance_micro_usd).toBe(2_500_000); // credited once
  });

  it('a transfer of another token is refused with the reason, exit 1', async () => {
    await fake.mint(wallet.address, 5_000_000n);
    const tx = await fake.transfer(wallet, treasury, 1_000_000n);
    const r = await svc(['deposit', '--chain', 'anvil', '--tx', tx]);
    expectOneLineError(r, 1, /^error: transfer_rejected: /);
  });
});
