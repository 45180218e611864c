import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Balance alerts (alerts module): the account's `balance_low` threshold (null: the deployment default)
 * and whether the alert is armed. It disarms when it fires (balance crossed below the threshold) and
 * re-arms once the balance is back at or above it, so it fires once per crossing.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table balance_alerts (
      account_id text primary key references accounts(id),
      threshold_micro_usd bigint check (threshold_micro_usd >= 0),
      armed boolean not null,
      fired_at timestamptz,
      updated_at timestamptz not null
    );
  `);
}
