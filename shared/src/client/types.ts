/** Response shapes of the gateway's JSON API, as the client sees them. */
export interface SignIn {
  token: string;
  session_id: string;
  account_id: string;
  wallet_address: string;
  expires_at: string;
  created_account: boolean;
}

export interface SessionInfo {
  id: string;
  current: boolean;
  wallet_address: string | null;
  user_agent: string | null;
  created_at: string;
  last_seen_at: string;
  expires_at: string;
}

export interface Wallet {
  address: string;
  linked_at: string;
}

export interface ApiKey {
  id: string;
  object: 'api_key';
  name: string | null;
  prefix: string;
  parent_id: string | null;
  scopes: string[];
  status: 'active' | 'frozen' | 'expiring' | 'expired' | 'revoked';
  spend_cap_micro_usd: number | null;
  spent_micro_usd: number;
  subtree_spent_micro_usd: number;
  created_at: string;
  expires_at: string | null;
  revoked_at: string | null;
  frozen_at: string | null;
  frozen_reason: string | null;
  rotated_to: string | null;
  last_used_at: string | null;
}

export interface NewApiKey extends ApiKey {
  key: string;
}

// ---- fleet nodes ----

export type NodeKindName = 'sandbox' | 'inference';
export type NodeStatus = 'online' | 'offline' | 'draining' | 'disabled' | 'pending_approval';
/** An owner gate: `disabled` takes no work; `draining` finishes running work and takes none. */
export type NodeGate = 'disabled' | 'draining';

/** Body of POST /v1/nodes/enroll (and the admin house-node enrollment). */
export interface NodeEnrollInput {
  name?: string;
  kinds: NodeKindName[];
  /** Public model ids an inference node serves (required for inference). */
  models?: string[];
  /** Public model id -> the node's local model name. */
  model_map?: Record<string, string>;
  speed_factor?: number;
}

/** An enrolled node as GET /v1/nodes shows it to anyone: no key, owner or endpoint. */
export interface PublicNode {
  id: string;
  type: 'node';
  name: string | null;
  kinds: string[];
  models: string[];
  speed_factor: number;
  clamp_count: number;
  status: NodeStatus;
  /** Share of dispatched jobs that ended well; null before any. */
  reliability: number | null;
  jobs_dispatched: number;
  /** Moving average of dispatch round-trip latency. */
  latency_ms: number | null;
  last_heartbeat_at: string | null;
}

/** What the node's owner (and the admin) sees. */
export interface OwnerNode extends PublicNode {
  approved: boolean;
  disabled: boolean;
  draining: boolean;
  house: boolean;
  key_prefix: string;
  model_map: Record<string, string>;
  declared_speed_factor: number;
  endpoint: string | null;
  capabilities: unknown;
  agent_version: string | null;
  created_at: string;
}

export interface EnrolledNode {
  node: OwnerNode;
  /** The nk-svc_ node key: shown once, stored as sha256. */
  node_key: string;
}

export interface GatewayRegistryEntry {
  id: 'gateway';
  type: 'gateway';
  name: string;
  status: 'online';
  version: string;
}

export interface TeeRegistryEntry {
  id: 'tee';
  type: 'tee_backend';
  configured: boolean;
  attested: boolean;
  status: string;
}

/** One entry of GET /v1/nodes (a bare array): the gateway, TEE backends, then enrolled nodes. */
export type NodeRegistryEntry = GatewayRegistryEntry | TeeRegistryEntry | PublicNode;
