import { z } from 'zod';
import { identityv1 } from '@agenthub/proto';
import { TENANT_QUOTAS, type TenantQuota, type ClientOf, type Kv, type Logger, type Metrics, type Principal } from '@agenthub/runtime';

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
  /** HUB_QUOTA_* of the quotas overridable per tenant, to show next to the overrides. */
  quotas: Record<TenantQuota, number>;
  defaults: TenantLimits;
  /** Unauthenticated work per client address: Agent Card fetches and failed authentications. */
  address: Rate;
}

const rate = z.object({ per_sec: z.number().min(0).max(1e6), burst: z.number().int().min(1).max(1e7) }).strict();

/** The operator's override of some of a tenant's limits, as `tenants.set_limits` takes it. */
export const overrideSchema = z
  .object({
    key: rate.optional(),
    tenant: rate.optional(),
    max_waiting_per_agent: z.number().int().min(0).max(1e6).optional(),
    // Checked by the services owning the resources; identity keeps them with the rest.
    quotas: z.partialRecord(z.enum(TENANT_QUOTAS), z.number().int().min(1).max(1e9)).optional(),
  })
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

/** How long a replica reuses a tenant's overrides before asking identity again. */
const OVERRIDE_CACHE_MS = 5_000;

/** Buckets (or addresses) this replica knows to be out of tokens, and until when. */
class KnownEmpty {
  private readonly until = new Map<string, number>();

  /** How long `key` is still known to be empty (0: not known, or no longer). */
  left(key: string): number {
    const until = this.until.get(key);
    if (until === undefined) return 0;
    const left = until - Date.now();
    if (left <= 0) this.until.delete(key);
    return Math.max(0, left);
  }

  mark(key: string, forMs: number): void {
    // Bounded: a flood of distinct keys empties it rather than growing it.
    if (this.until.size > 10_000) this.until.clear();
    this.until.set(key, Date.now() + forMs);
  }
}

/**
 * Rate limits in token buckets of the shared Kv, so every gateway replica draws from the same
 * buckets (Redis), or the process's own (embedded mode).
 */
export class Buckets {
  private readonly overrides = new Map<string, { value: Override; until: number }>();
  /** Addresses known to be out of tokens, to refuse them before any lookup without a Kv call. */
  private readonly exhausted = new KnownEmpty();
  /**
   * Key and tenant buckets known to hold less than one token (by bucket and rate): a noisy
   * caller's refusals then cost no Kv call. Exact, as no replica can add tokens to a bucket faster
   * than it refills; a changed rate is another entry.
   */
  private readonly empty = new KnownEmpty();

  constructor(
    private readonly kv: Kv,
    private readonly identity: ClientOf<typeof identityv1.IdentityService>,
    readonly config: LimitsConfig,
    private readonly metrics: Metrics,
    private readonly log: Logger,
  ) {}

  /** `principal` reads the overrides: the tenant's own agent, or the operator. */
  async limitsOf(tenantId: string, principal: Principal): Promise<TenantLimits> {
    const override = await this.override(tenantId, principal);
    const d = this.config.defaults;
    return {
      key: override.key ? { perSec: override.key.per_sec, burst: override.key.burst } : d.key,
      tenant: override.tenant ? { perSec: override.tenant.per_sec, burst: override.tenant.burst } : d.tenant,
      maxWaitingPerAgent: override.max_waiting_per_agent ?? d.maxWaitingPerAgent,
    };
  }

  /**
   * The tenant's overrides, cached for a few seconds. `fresh` asks identity now and lets its
   * errors (no such tenant) through; otherwise a failure means the defaults.
   */
  async override(tenantId: string, principal: Principal, fresh = false): Promise<Override> {
    const cached = this.overrides.get(tenantId);
    if (!fresh && cached && cached.until > Date.now()) return cached.value;
    let value: Override;
    try {
      const { limits } = await this.identity.getTenantLimits({ tenantId }, { principal });
      value = overrideOf(limits);
    } catch (err) {
      if (fresh) throw err;
      // Limits must not take the hub down with identity: the last known overrides (else the
      // defaults) apply, and are kept a while, so a struggling identity is not asked on every call.
      this.log.warn({ err, tenantId }, 'tenant limits unavailable; using the last known or the defaults');
      value = cached?.value ?? {};
    }
    if (this.overrides.size > 10_000) this.overrides.clear();
    this.overrides.set(tenantId, { value, until: Date.now() + OVERRIDE_CACHE_MS });
    return value;
  }

  /** Replaces the tenant's overrides (operator only; identity checks). */
  async setOverride(tenantId: string, value: Override, principal: Principal): Promise<void> {
    const rate = (r: { per_sec: number; burst: number } | undefined) => r && { perSec: r.per_sec, burst: r.burst };
    await this.identity.setTenantLimits(
      {
        tenantId,
        limits: {
          key: rate(value.key),
          tenant: rate(value.tenant),
          maxWaitingPerAgent: value.max_waiting_per_agent,
          quotas: Object.fromEntries(Object.entries(value.quotas ?? {}).map(([name, n]) => [name, BigInt(n)])),
        },
      },
      { principal },
    );
    this.overrides.delete(tenantId);
  }

  /** Draws `calls` tokens from the key's bucket, then the tenant's. */
  async request(tenantId: string, keyId: string, calls: number, limits: TenantLimits): Promise<Refusal | Admission> {
    const buckets = [
      ['key', `rl:key:${keyId}`, limits.key],
      ['tenant', `rl:tenant:${tenantId}`, limits.tenant],
    ] as const;
    for (const [scope, bucket, r] of buckets) {
      if (r.perSec <= 0) continue;
      const left = this.empty.left(emptyKey(bucket, r));
      // Tokens it lacks beyond the first come at the bucket's rate.
      if (left > 0) return this.refused(scope, tenantId, r, 0, Math.ceil(left + ((calls - 1) * 1000) / r.perSec));
    }
    let admission: Admission = { limit: Infinity, remaining: Infinity };
    for (const [scope, bucket, r] of buckets) {
      if (r.perSec <= 0) continue;
      const taken = await this.kv.take(bucket, r.burst, r.perSec, calls);
      if (!taken.allowed) {
        // A single call's wait is the time until one token: the bucket's, for every call of this replica.
        if (calls === 1) this.empty.mark(emptyKey(bucket, r), taken.retryAfterMs);
        return this.refused(scope, tenantId, r, taken.remaining, taken.retryAfterMs);
      }
      if (taken.remaining < admission.remaining) admission = { limit: r.burst, remaining: taken.remaining };
    }
    return admission;
  }

  /** Whether `address` ran out of unauthenticated work recently (checked locally, no Kv call). */
  addressRefused(address: string): Refusal | undefined {
    const left = this.exhausted.left(address);
    return left > 0 ? this.refused('address', '', this.config.address, 0, left) : undefined;
  }

  /** Charges one unit of unauthenticated work (a card fetch, a failed authentication) to `address`. */
  async chargeAddress(address: string): Promise<Refusal | undefined> {
    const r = this.config.address;
    if (r.perSec <= 0) return undefined;
    const taken = await this.kv.take(`rl:addr:${address}`, r.burst, r.perSec, 1);
    if (taken.allowed && taken.remaining >= 1) return undefined;
    const retryAfterMs = taken.allowed ? Math.ceil(1000 / r.perSec) : taken.retryAfterMs;
    this.exhausted.mark(address, retryAfterMs);
    return taken.allowed ? undefined : this.refused('address', '', r, 0, retryAfterMs);
  }

  refused(scope: Scope, tenantId: string, r: Rate, remaining: number, retryAfterMs: number): Refusal {
    this.metrics.limited(scope, tenantId);
    return { scope, retryAfterMs, limit: r.burst, remaining };
  }
}

/** A bucket's entry in KnownEmpty: its rate is part of it, so new limits are looked up again. */
function emptyKey(bucket: string, r: Rate): string {
  return `${bucket}|${r.perSec}|${r.burst}`;
}

function overrideOf(limits: identityv1.TenantLimits | undefined): Override {
  const override: Override = {};
  if (limits?.key) override.key = { per_sec: limits.key.perSec, burst: limits.key.burst };
  if (limits?.tenant) override.tenant = { per_sec: limits.tenant.perSec, burst: limits.tenant.burst };
  if (limits?.maxWaitingPerAgent !== undefined) override.max_waiting_per_agent = limits.maxWaitingPerAgent;
  const quotas = Object.entries(limits?.quotas ?? {}).filter(([name]) => (TENANT_QUOTAS as readonly string[]).includes(name));
  if (quotas.length) override.quotas = Object.fromEntries(quotas.map(([name, n]) => [name, Number(n)])) as Override['quotas'];
  return override;
}
