import { InvalidArgumentError, type Command } from 'commander';
import type { Balance, Deposit } from '@svc/shared/client';
import { context, sessionClient } from '../context.ts';
import { CliError, EXIT_FAILURE } from '../errors.ts';
import { fields, usd } from '../output.ts';
import { progress } from '../progress.ts';

const TX_HASH = /^0x[0-9a-fA-F]{64}$/;

function txHash(value: string): string {
  const v = value.trim();
  if (!TX_HASH.test(v)) throw new InvalidArgumentError('expected a transaction hash: 0x followed by 64 hex digits');
  return v;
}

function logIndex(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || n > 1_000_000) throw new InvalidArgumentError('expected a log index, 0 to 1000000');
  return n;
}

function balanceText(b: Balance): string {
  return fields([
    ['balance', usd(b.balance_micro_usd)],
    ['held', `${usd(b.held_micro_usd)} (reserved by requests in flight)`],
    ['leased', usd(b.leased_micro_usd)],
    ['spendable', usd(b.spendable_micro_usd)],
    ['billing', b.billing_enforced ? 'enforced: requests beyond the spendable credit are refused (402)' : 'not enforced: metered and receipted, never refused for credit'],
  ]);
}

function depositText(d: Deposit): string {
  const head =
    d.status === 'credited'
      ? `Credited ${usd(d.amount_micro_usd)} from ${d.tx_hash} on ${d.chain}.`
      : `Pending: ${d.confirmations} of ${d.required_confirmations} confirmations on ${d.chain}; nothing credited yet. Run the same command again later.`;
  return [
    head,
    fields([
      ['deposit', d.id],
      ['from', d.from],
      ['amount', `${d.amount} base units (${usd(d.amount_micro_usd)})`],
      ['block', String(d.block_number)],
      ['status', d.status],
    ]),
  ].join('\n');
}

export function registerBilling(program: Command): void {
  program
    .command('balance')
    .description('Your credit: balance, held by requests in flight, spendable')
    .action(async (_opts: unknown, cmd: Command) => {
      const ctx = context(cmd);
      const b = await sessionClient(ctx).client.balance();
      ctx.out.result(b, () => balanceText(b));
    });

  program
    .command('deposit')
    .description('Credit a USDT transfer you sent to the treasury: the gateway verifies it on chain, once')
    .requiredOption('--chain <chain>', 'the chain the transfer is on: a name from GET /v1/billing/methods, or eip155:<chain id>')
    .requiredOption('--tx <hash>', 'the transaction hash (0x + 64 hex digits)', txHash)
    .option('--log-index <n>', 'the Transfer log to credit when the transaction holds several', logIndex)
    .action(async (opts: { chain: string; tx: string; logIndex?: number }, cmd: Command) => {
      const ctx = context(cmd);
      const { client } = sessionClient(ctx);
      const spin = progress(`verifying ${opts.tx} on ${opts.chain}`);
      const d = await client.deposit({ chain: opts.chain, tx_hash: opts.tx, ...(opts.logIndex !== undefined ? { log_index: opts.logIndex } : {}) }).finally(() => spin.stop());
      if (d.status === 'rejected') throw new CliError(`the transfer was rejected: ${d.reason ?? 'it failed a check'}`, EXIT_FAILURE, 'check the chain, the hash and that it sent USDT to the treasury (GET /v1/billing/methods)');
      ctx.out.result(d, () => depositText(d));
    });
}
