import { describe, expect, it } from 'vitest';
import { checkRegistration } from './registration.ts';

describe('registration metadata', () => {
  it('registers public clients with defaults', () => {
    expect(checkRegistration({ redirect_uris: ['https://app.example/cb'], client_name: ' App ', unknown_field: 1 })).toEqual({
      redirect_uris: ['https://app.example/cb'],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      client_name: 'App',
    });
  });

  it.each([
    [{ redirect_uris: ['http://app.example/cb'] }, 'invalid_redirect_uri'],
    [{ redirect_uris: [] }, 'invalid_redirect_uri'],
    [{}, 'invalid_redirect_uri'],
    [{ redirect_uris: ['https://a.example/cb'], token_endpoint_auth_method: 'client_secret_basic' }, 'invalid_client_metadata'],
    [{ redirect_uris: ['https://a.example/cb'], grant_types: ['client_credentials'] }, 'invalid_client_metadata'],
    [{ redirect_uris: ['https://a.example/cb'], response_types: ['token'] }, 'invalid_client_metadata'],
    [{ redirect_uris: ['https://a.example/cb'], scope: 'billing root' }, 'invalid_client_metadata'],
    ['not an object', 'invalid_client_metadata'],
  ])('refuses %j with %s', (body, error) => {
    expect(() => checkRegistration(body)).toThrow(expect.objectContaining({ error }));
  });
});
