import { describe, expect, it } from 'vitest';
import { clientFromDocument, clientIdUrlProblem, fetchClientMetadata, isUrlClientId } from './client-metadata.ts';
import { OAuthError } from './params.ts';

const URL_ID = 'https://app.example/oauth/client.json';
const self = (allowPrivate: boolean) => ({ publicUrl: new URL('https://gateway.example'), port: 8080, host: '127.0.0.1', allowPrivate });

describe('client metadata documents', () => {
  it('tells a URL client_id from a registered one', () => {
    expect(isUrlClientId(URL_ID)).toBe(true);
    expect(isUrlClientId('oauthc_abc')).toBe(false);
  });

  it('takes https URLs with a path; http only on loopback where private addresses are allowed', () => {
    expect(clientIdUrlProblem(URL_ID, false)).toBeNull();
    expect(clientIdUrlProblem('https://app.example', false)).toMatch(/path/);
    expect(clientIdUrlProblem('https://app.example/a/../b.json', false)).toMatch(/\.\./);
    expect(clientIdUrlProblem('https://app.example/c.json#x', false)).toMatch(/fragment/);
    expect(clientIdUrlProblem('https://u:p@app.example/c.json', false)).toMatch(/credentials/);
    expect(clientIdUrlProblem('http://127.0.0.1:9/c.json', false)).toMatch(/https/);
    expect(clientIdUrlProblem('http://127.0.0.1:9/c.json', true)).toBeNull();
    expect(clientIdUrlProblem('http://app.example/c.json', true)).toMatch(/https/);
  });

  it('refuses private and loopback hosts before connecting, unless allowed (the webhook rules)', async () => {
    await expect(fetchClientMetadata('https://127.0.0.1:9/c.json', self(false))).rejects.toThrow(/not a public address/);
    await expect(fetchClientMetadata('https://10.1.2.3/c.json', self(false))).rejects.toThrow(/not a public address/);
    await expect(fetchClientMetadata('https://gateway.example/c.json', self(true))).rejects.toThrow(/this gateway/);
  });

  it('checks the document: its client_id is its URL, public client, valid redirect URIs', () => {
    const doc = { client_id: URL_ID, client_name: 'Example', redirect_uris: ['http://127.0.0.1:7777/cb'] };
    expect(clientFromDocument(URL_ID, doc)).toEqual({ client_id: URL_ID, client_name: 'Example', redirect_uris: ['http://127.0.0.1:7777/cb'], kind: 'metadata_document', scopes: null });
    expect(clientFromDocument(URL_ID, { ...doc, client_name: undefined }).client_name).toBe('app.example');
    const refused = (d: unknown) => {
      try {
        clientFromDocument(URL_ID, d);
      } catch (e) {
        expect(e).toBeInstanceOf(OAuthError);
        return (e as OAuthError).description;
      }
      throw new Error('accepted');
    };
    expect(refused({ ...doc, client_id: 'https://other.example/c.json' })).toMatch(/client_id equal to its own URL/);
    expect(refused({ ...doc, client_secret: 's' })).toMatch(/secret/);
    expect(refused({ ...doc, token_endpoint_auth_method: 'client_secret_basic' })).toMatch(/public clients/);
    expect(refused({ ...doc, redirect_uris: ['http://evil.example/cb'] })).toMatch(/loopback/);
    expect(refused({ ...doc, redirect_uris: [] })).toMatch(/redirect_uris/);
    expect(refused([doc])).toMatch(/JSON object/);
  });
});
