/**
 * Refreshes a "last used" column at most once per interval per row, off the request path, so that
 * authentication stays one database round trip.
 */
export class ThrottledTouch {
  private readonly last = new Map<string, number>();
  constructor(
    private readonly write: (id: string, now: Date) => Promise<unknown>,
    private readonly everyMs = 60_000,
  ) {}

  touch(id: string, now: Date): void {
    const prev = this.last.get(id) ?? 0;
    if (now.getTime() - prev < this.everyMs) return;
    if (this.last.size > 10_000) this.last.clear();
    this.last.set(id, now.getTime());
    void this.write(id, now).catch(() => undefined);
  }
}
