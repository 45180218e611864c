/** What the gateway dials for a registration: the unsealed URL and the headers its credential goes in. */
export interface UpstreamTarget {
  id: string;
  accountId: string;
  /** Changes with every edit of the registration. */
  version: string;
  url: URL;
  headers: Record<string, string>;
  /** null: every tool. */
  allowed: ReadonlySet<string> | null;
  priceMicroUsd: number;
  enabled: boolean;
}
