import { describe, expect, it } from 'vitest';
import { redactUrl } from './log-redaction.ts';

describe('request log URL redaction', () => {
  it('replaces the token of a hook URL and of an invite, and nothing else', () => {
    expect(redactUrl('/v1/agents/agt_1/hooks/ahk_secret-token')).toBe('/v1/agents/agt_1/hooks/[redacted]');
    expect(redactUrl('/v1/agents/agt_1/hooks/ahk_secret?x=1')).toBe('/v1/agents/agt_1/hooks/[redacted]?x=1');
    expect(redactUrl('/v1/orgs/invites/orginv_abc/accept')).toBe('/v1/orgs/invites/[redacted]/accept');
    for (const owner of ['rotate', 'disable', 'secret']) expect(redactUrl(`/v1/agents/agt_1/hooks/${owner}`)).toBe(`/v1/agents/agt_1/hooks/${owner}`);
    expect(redactUrl('/v1/agents/agt_1/hooks/rotatex')).toBe('/v1/agents/agt_1/hooks/[redacted]');
    expect(redactUrl('/v1/agents/agt_1/runs')).toBe('/v1/agents/agt_1/runs');
  });

  it('replaces the token of a legacy claim link and of its page', () => {
    expect(redactUrl('/v1/legacy/claim/lgc_secret-token')).toBe('/v1/legacy/claim/[redacted]');
    expect(redactUrl('/legacy/claim/lgc_secret-token?x=1')).toBe('/legacy/claim/[redacted]?x=1');
    expect(redactUrl('/v1/legacy/claims/lgp_1/open')).toBe('/v1/legacy/claims/lgp_1/open');
  });
});
