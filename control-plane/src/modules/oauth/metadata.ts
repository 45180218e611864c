import { SCOPE_NAMES } from '@svc/shared';

/** The MCP endpoint these tokens are for (RFC 9728's protected resource); served by the MCP module. */
export const MCP_RESOURCE_PATH = '/v1/mcp';

/** This gateway's issuer identifier: its public origin (SVC_PUBLIC_URL), without a trailing slash. */
export const issuerOf = (publicUrl: URL) => publicUrl.origin;

/** The resource indicators (RFC 8707) an authorization request may name: the MCP endpoint, or the API itself. */
export function acceptedResources(publicUrl: URL): string[] {
  const origin = issuerOf(publicUrl);
  return [`${origin}${MCP_RESOURCE_PATH}`, origin, `${origin}/`];
}

/** Authorization server metadata, RFC 8414. */
export function authorizationServerMetadata(publicUrl: URL) {
  const issuer = issuerOf(publicUrl);
  return {
    issuer,
    authorization_endpoint: `${issuer}/v1/oauth/authorize`,
    token_endpoint: `${issuer}/v1/oauth/token`,
    registration_endpoint: `${issuer}/v1/oauth/register`,
    revocation_endpoint: `${issuer}/v1/oauth/revoke`,
    scopes_supported: [...SCOPE_NAMES],
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: ['authorization_code', 'refresh_token'],
    token_endpoint_auth_methods_supported: ['none'],
    revocation_endpoint_auth_methods_supported: ['none'],
    code_challenge_methods_supported: ['S256'],
    authorization_response_iss_parameter_supported: true,
    client_id_metadata_document_supported: true,
  };
}

/** Protected resource metadata for the MCP endpoint, RFC 9728. */
export function protectedResourceMetadata(publicUrl: URL) {
  const issuer = issuerOf(publicUrl);
  return {
    resource: `${issuer}${MCP_RESOURCE_PATH}`,
    authorization_servers: [issuer],
    scopes_supported: [...SCOPE_NAMES],
    bearer_methods_supported: ['header'],
    resource_name: 'svc gateway MCP server',
  };
}
