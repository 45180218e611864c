/**
 * Names for request and response shapes of the gateway's JSON API, all derived from the generated types
 * (generated/openapi.ts, from the router's OpenAPI document): none is written by hand.
 */
import type { paths } from './generated/openapi.ts';

export type { paths } from './generated/openapi.ts';

export type HttpMethod = 'get' | 'put' | 'post' | 'delete' | 'patch';
/** The API's paths (OpenAPI templates such as `/v1/keys/{id}`) that answer `M`. */
export type PathWith<M extends HttpMethod> = { [P in keyof paths]: paths[P] extends Record<M, { responses: unknown }> ? P : never }[keyof paths];
type Operation<P extends keyof paths, M extends HttpMethod> = paths[P] extends Record<M, infer O> ? O : never;
type JsonContent<R> = R extends { content: { 'application/json': infer J } } ? J : never;

/** The JSON body of `M P`'s success answer (200, 201 or 202). */
export type ApiResponse<P extends keyof paths, M extends HttpMethod> =
  Operation<P, M> extends { responses: infer R } ? JsonContent<R[Extract<keyof R, 200 | 201 | 202>]> : never;
/** The JSON request body `M P` takes. */
export type ApiRequestBody<P extends keyof paths, M extends HttpMethod> = Operation<P, M> extends { requestBody?: infer B } ? JsonContent<NonNullable<B>> : never;
/** The query parameters `M P` takes. */
export type ApiQuery<P extends keyof paths, M extends HttpMethod> = Operation<P, M> extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never;

type Item<T> = T extends readonly (infer I)[] ? I : never;

// identity
export type SignIn = ApiResponse<'/v1/auth/verify', 'post'>;
export type SessionInfo = Item<ApiResponse<'/v1/auth/sessions', 'get'>>;
export type Wallet = Item<ApiResponse<'/v1/auth/wallets', 'get'>>;
export type Me = ApiResponse<'/v1/auth/me', 'get'>;

// keys
export type KeyInput = ApiRequestBody<'/v1/keys', 'post'>;
export type ApiKey = Item<ApiResponse<'/v1/keys', 'get'>>;
export type NewApiKey = ApiResponse<'/v1/keys', 'post'>;

// fleet nodes
/** One entry of GET /v1/nodes (a bare array): the gateway, TEE backends, then enrolled nodes. */
export type NodeRegistryEntry = Item<ApiResponse<'/v1/nodes', 'get'>>;
export type GatewayRegistryEntry = Extract<NodeRegistryEntry, { type: 'gateway' }>;
export type TeeRegistryEntry = Extract<NodeRegistryEntry, { type: 'tee_backend' }>;
/** An enrolled node as GET /v1/nodes shows it to anyone: no key, owner or endpoint. */
export type PublicNode = Extract<NodeRegistryEntry, { type: 'node' }>;
export type NodeStatus = PublicNode['status'];
/** Body of POST /v1/nodes/enroll. */
export type NodeEnrollInput = ApiRequestBody<'/v1/nodes/enroll', 'post'>;
export type NodeKindName = NodeEnrollInput['kinds'][number];
/** What the node's owner (and the admin) sees. */
export type OwnerNode = ApiResponse<'/v1/admin/nodes/approve', 'post'>;
export type EnrolledNode = ApiResponse<'/v1/nodes/enroll', 'post'>;
/** An owner gate: `disabled` takes no work; `draining` finishes running work and takes none. */
export type NodeGate = ApiRequestBody<'/v1/admin/nodes/gate', 'post'>['gate'];

// money
export type Balance = ApiResponse<'/v1/billing/balance', 'get'>;
export type BillingMethods = ApiResponse<'/v1/billing/methods', 'get'>;
export type Usage = ApiResponse<'/v1/usage', 'get'>;
export type UsageEventsQuery = ApiQuery<'/v1/usage/events', 'get'>;
export type UsageEvent = Item<Usage['events']>;
export type UsageEventsPage = Extract<ApiResponse<'/v1/usage/events', 'get'>, { events: unknown }>;
export type DepositInput = ApiRequestBody<'/v1/billing/deposits', 'post'>;
export type Deposit = ApiResponse<'/v1/billing/deposits', 'post'>;

// receipts
export type ReceiptPubkey = ApiResponse<'/v1/receipts/pubkey', 'get'>;
export type StoredReceipt = ApiResponse<'/v1/receipts/{id}', 'get'>;

// inference
export type ModelList = ApiResponse<'/v1/models', 'get'>;
export type ChatCompletionInput = ApiRequestBody<'/v1/chat/completions', 'post'>;

// sandboxes
export type SandboxRunInput = ApiRequestBody<'/v1/sandboxes', 'post'>;
export type SandboxRun = ApiResponse<'/v1/sandboxes', 'post'>;

// webhooks
export type WebhookInput = ApiRequestBody<'/v1/webhooks', 'post'>;
export type Webhook = Item<ApiResponse<'/v1/webhooks', 'get'>>;
export type NewWebhook = ApiResponse<'/v1/webhooks', 'post'>;
export type WebhookEventType = NonNullable<WebhookInput['events']>[number];
export type WebhookTestEvent = ApiResponse<'/v1/webhooks/{id}/test', 'post'>;
export type WebhookDelivery = Item<ApiResponse<'/v1/webhooks/{id}/deliveries', 'get'>>;
