import type { Clock } from '@svc/shared';

/** How often the gateway asks an upstream for its tools again when a call names one it has not seen listed. */
const RECHECK_MS = 5_000;
const MAX_SERVERS = 10_000;

/**
 * The tool names each registered server listed, as seen by this process (from the tools/list answers that
 * pass through, or asked for by the gateway). A server without an allow list admits the tools it lists: a call
 * naming anything else is refused before the call is sent, so an unknown tool is never charged. Keyed by the
 * registration's id and version (a PATCH starts afresh).
 */
export class ListedTools {
  private readonly seen = new Map<string, { version: string; names: Set<string>; checkedAt: number }>();

  constructor(private readonly clock: Clock) {}

  /** Records the tools of a tools/list answer; a first page (no cursor asked) replaces what was known. */
  record(serverId: string, version: string, result: unknown, firstPage: boolean): void {
    const tools = (result as { tools?: unknown } | undefined)?.tools;
    if (!Array.isArray(tools)) return;
    const names = tools.map((t: { name?: unknown }) => t?.name).filter((n): n is string => typeof n === 'string');
    const known = this.seen.get(serverId);
    if (!firstPage && known?.version === version) {
      for (const n of names) known.names.add(n);
      return;
    }
    if (this.seen.size >= MAX_SERVERS && !known) this.seen.clear();
    this.seen.set(serverId, { version, names: new Set(names), checkedAt: this.clock.now().getTime() });
  }

  /** Listed: yes; not listed and asked recently: no; otherwise the upstream must be asked again. */
  lookup(serverId: string, version: string, name: string): 'listed' | 'unlisted' | 'ask' {
    const known = this.seen.get(serverId);
    if (!known || known.version !== version) return 'ask';
    if (known.names.has(name)) return 'listed';
    return this.clock.now().getTime() - known.checkedAt < RECHECK_MS ? 'unlisted' : 'ask';
  }
}
