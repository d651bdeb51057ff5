import { randomBytes } from 'node:crypto';
import { AUTH_LOCAL_LEASE_MS, AUTH_REVOKED_CHANNEL, type Kv } from '@agenthub/runtime';
import type { AgentPrincipal } from './auth.js';

const PING = 'ping:';

/**
 * "API key hash → principal" in this gateway's memory, in front of the shared Kv cache, so a call
 * with a known key costs no round trip. Revocation drops entries through AUTH_REVOKED_CHANNEL;
 * the entries are trusted only while a ping this gateway published on that channel came back
 * within the last AUTH_LOCAL_LEASE_MS (the argument is in libs/runtime auth-cache.ts), and it
 * forgets everything whenever the subscription reports a gap. Otherwise `get` answers nothing and
 * the caller asks the Kv, as without this cache.
 */
export class AuthMemory {
  private readonly entries = new Map<string, { principal: AgentPrincipal; until: number }>();
  private readonly pings = new Map<string, number>();
  private readonly id = randomBytes(6).toString('hex');
  private seq = 0;
  /** Incremented by every revocation heard; a lookup fills only if none came while it ran. */
  private epoch = 0;
  /** When the newest ping that came back was sent (performance.now()). */
  private confirmedSentAt = -Infinity;
  private timer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => Promise<void>) | undefined;

  constructor(
    private readonly kv: Kv,
    private readonly ttlMs: number,
    private readonly maxEntries = 100_000,
    private readonly leaseMs = AUTH_LOCAL_LEASE_MS,
  ) {}

  async start(): Promise<void> {
    this.unsubscribe = await this.kv.subscribe(AUTH_REVOKED_CHANNEL, (message) => this.heard(message), () => this.forget());
    // Several pings per lease, so a healthy subscription never lets the lease lapse.
    this.timer = setInterval(() => this.ping(), Math.max(10, Math.floor(this.leaseMs / 5)));
    this.timer.unref();
    this.ping();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.entries.clear();
    await this.unsubscribe?.().catch(() => undefined);
  }

  /** The epoch to pass to `fill` for a lookup that starts now. */
  snapshot(): number {
    return this.epoch;
  }

  get(keyHash: string): AgentPrincipal | undefined {
    if (!this.live()) return undefined;
    const entry = this.entries.get(keyHash);
    if (!entry) return undefined;
    if (entry.until > Date.now()) return entry.principal;
    this.entries.delete(keyHash);
    return undefined;
  }

  /** Remembers a lookup's answer unless a revocation was heard since it started (`epoch`). */
  fill(keyHash: string, principal: AgentPrincipal, epoch: number): void {
    if (epoch !== this.epoch || !this.live()) return;
    if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    // Shared by every call with this key until it expires: frozen, so none can change it for the rest.
    this.entries.set(keyHash, { principal: Object.freeze(principal), until: Date.now() + this.ttlMs });
  }

  private live(): boolean {
    return performance.now() - this.confirmedSentAt <= this.leaseMs;
  }

  private heard(message: string): void {
    if (message.startsWith(PING)) {
      const sentAt = this.pings.get(message);
      if (sentAt === undefined) return; // another gateway's
      this.pings.delete(message);
      this.confirmedSentAt = Math.max(this.confirmedSentAt, sentAt);
      return;
    }
    this.epoch += 1;
    this.entries.delete(message);
  }

  /**
   * Revocations may have been missed (the subscription dropped or came back): drop every entry and
   * every lookup in flight. The pings alone would not tell: one sent after a short outage comes
   * back although a revocation published during it never will.
   */
  private forget(): void {
    this.epoch += 1;
    this.entries.clear();
  }

  private ping(): void {
    const now = performance.now();
    for (const [ping, sentAt] of this.pings) if (now - sentAt > this.leaseMs) this.pings.delete(ping);
    const ping = `${PING}${this.id}.${(this.seq += 1)}`;
    this.pings.set(ping, now);
    // A failed publish only lets the lease lapse: the Kv answers instead, tombstones included.
    this.kv.publish(AUTH_REVOKED_CHANNEL, ping).catch(() => undefined);
  }
}
