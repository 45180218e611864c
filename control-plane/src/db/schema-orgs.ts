import type { OrgRole } from '../modules/orgs/roles.ts';

/** Organizations (orgs module). The billing account is the creator's; keys, credit and receipts stay on it. */
export interface OrgsTable {
  id: string;
  name: string;
  billing_account_id: string;
  created_by: string;
  created_at: Date;
  updated_at: Date;
}

export interface OrgMembersTable {
  org_id: string;
  account_id: string;
  role: OrgRole;
  invited_by: string | null;
  joined_at: Date;
}

/** An invite's token is shown once; only its sha256 is kept. */
export interface OrgInvitesTable {
  id: string;
  org_id: string;
  token_hash: string;
  role: OrgRole;
  /** The one account that may accept, or null for whoever holds the link. */
  account_id: string | null;
  created_by: string;
  created_at: Date;
  expires_at: Date;
  accepted_at: Date | null;
  accepted_by: string | null;
  revoked_at: Date | null;
}
