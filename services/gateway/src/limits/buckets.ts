import { z } from 'zod';
import type { Kv, Metrics } from '@agenthub/runtime';

/** One token bucket's shape: `perSec` tokens a second, up to `burst`; `perSec` 0 turns it off. */
export interface Rate {
  perSec: number;
  burst: number;
}

/** The limits a tenant's agents get; the operator may override them per tenant. */
export interface TenantLimits {
  /** Calls a second per API key (each call of a batch counts). */
  key: Rate;
  /** Calls a second across all keys of the tenant. */
  tenant: Rate;
  /** Waiting calls (long-polls, blocking sends, streams) one agent may hold open at once. */
  maxWaitingPerAgent: number;
}

export interface LimitsConfig {
  defaults: TenantLimits;
  /** Unauthenticated work per client address: Agent Card fetches and failed authentications. */
  address: Rate;
  /** Behind a proxy that appends the client to X-Forwarded-For (the chart's Ingress). */
  trustForwardedFor: boolean;
}

const rate = z.object({ per_sec: z.number().min(0).max(1e6), burst: z.number().int().min(1).max(1e7) }).strict();

/** The operator's override of some of a tenant's limits, as `tenants.set_limits` takes it. */
export const overrideSchema = z
  .object({ key: rate.optional(), tenant: rate.optional(), max_waiting_per_agent: z.number().int().min(0).max(1e6).optional() })
  .strict();
export type Override = z.infer<typeof overrideSchema>;

/** Why a call was refused; the `reason` label of `agenthub_limited_requests_total`. */
export type Scope = 'key' | 'tenant' | 'address' | 'waiting';

export interface Refusal {
  scope: Scope;
  retryAfterMs: number;
  limit: number;
  remaining: number;
}

/** What the RateLimit-* headers of an admitted request report: the tightest bucket it drew from. */
export interface Admission {
  limit: number;
  remaining: number;
}

const OVERRIDE_KEY = (tenantId: string) => `limits:tenant:${tenantId}`;
/** How long a replica reuses a tenant's override before reading it again. */
const OVERRIDE_CACHE_MS = 5_000;

/**
 * Rate limits in token buckets of the shared Kv, so every gateway replica draws from the same
 * buckets (Redis), or the process's own (embedded mode).
 */
export class Buckets {
  private readonly overrides = new Map<string, { value: Override; until: number }>();
  /** Addresses known to be out of tokens, to refuse them before any lookup without a Kv call. */
  private readonly exhausted = new Map<string, number>();

  constructor(
    private readonly kv: Kv,
    readonly config: LimitsConfig,
    private readonly metrics: Metrics,
  ) {}

  async limitsOf(tenantId: string): Promise<TenantLimits> {
    const override = await this.override(tenantId);
    const d = this.config.defaults;
    return {
      key: override.key ? { perSec: override.key.per_sec, burst: override.key.burst } : d.key,
      tenant: override.tenant ? { perSec: override.tenant.per_sec, burst: override.tenant.burst } : d.tenant,
      maxWaitingPerAgent: override.max_waiting_per_agent ?? d.maxWaitingPerAgent,
    };
  }

  async override(tenantId: string): Promise<Override> {
    const cached = this.overrides.get(tenantId);
    if (cached && cached.until > Date.now()) return cached.value;
    const raw = await this.kv.get(OVERRIDE_KEY(tenantId));
    const value = raw ? overrideSchema.parse(JSON.parse(raw)) : {};
    this.overrides.set(tenantId, { value, until: Date.now() + OVERRIDE_CACHE_MS });
    return value;
  }

  async setOverride(tenantId: string, value: Override): Promise<void> {
    if (Object.keys(value).length === 0) await this.kv.del(OVERRIDE_KEY(tenantId));
    else await this.kv.set(OVERRIDE_KEY(tenantId), JSON.stringify(value));
    this.overrides.delete(tenantId);
  }

  /** Draws `calls` tokens from the key's bucket, then the tenant's. */
  async request(tenantId: string, keyId: string, calls: number, limits: TenantLimits): Promise<Refusal | Admission> {
    let admission: Admission = { limit: Infinity, remaining: Infinity };
    for (const [scope, bucket, r] of [
      ['key', `rl:key:${keyId}`, limits.key],
      ['tenant', `rl:tenant:${tenantId}`, limits.tenant],
    ] as const) {
      if (r.perSec <= 0) continue;
      const taken = await this.kv.take(bucket, r.burst, r.perSec, calls);
      if (!taken.allowed) return this.refused(scope, tenantId, r, taken.remaining, taken.retryAfterMs);
      if (taken.remaining < admission.remaining) admission = { limit: r.burst, remaining: taken.remaining };
    }
    return admission;
  }

  /** Whether `address` ran out of unauthenticated work recently (checked locally, no Kv call). */
  addressRefused(address: string): Refusal | undefined {
    const until = this.exhausted.get(address);
    if (until === undefined) return undefined;
    const left = until - Date.now();
    if (left <= 0) {
      this.exhausted.delete(address);
      return undefined;
    }
    return this.refused('address', '', this.config.address, 0, left);
  }

  /** Charges one unit of unauthenticated work (a card fetch, a failed authentication) to `address`. */
  async chargeAddress(address: string): Promise<Refusal | undefined> {
    const r = this.config.address;
    if (r.perSec <= 0) return undefined;
    const taken = await this.kv.take(`rl:addr:${address}`, r.burst, r.perSec, 1);
    if (taken.allowed && taken.remaining >= 1) return undefined;
    const retryAfterMs = taken.allowed ? Math.ceil(1000 / r.perSec) : taken.retryAfterMs;
    if (this.exhausted.size > 10_000) this.exhausted.clear();
    this.exhausted.set(address, Date.now() + retryAfterMs);
    return taken.allowed ? undefined : this.refused('address', '', r, 0, retryAfterMs);
  }

  refused(scope: Scope, tenantId: string, r: Rate, remaining: number, retryAfterMs: number): Refusal {
    this.metrics.limitedRequests.inc({ reason: scope, tenant: tenantId });
    return { scope, retryAfterMs, limit: r.burst, remaining };
  }
}
