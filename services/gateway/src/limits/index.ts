import type Koa from 'koa';
import { z } from 'zod';
import type { identityv1 } from '@agenthub/proto';
import { HubError, type ClientOf, type HubConfig, type Kv, type Logger, type Metrics, type Principal } from '@agenthub/runtime';
import type { AgentCaller } from '../auth.js';
import { toA2aRpcError } from '../a2a/errors.js';
import { toRpcError, type RpcError } from '../errors.js';
import type { RpcMethod } from '../jsonrpc.js';
import { clientAddressOf, type ProxyTrust } from '../origin.js';
import { parseParams } from '../params.js';
import { Buckets, overrideSchema, type Admission, type LimitsConfig, type Refusal } from './buckets.js';
import { WaitingCalls, waitingCalls } from './waiting.js';

export type { LimitsConfig, Rate, TenantLimits } from './buckets.js';

/** The limits of HUB_RATE_* and HUB_MAX_WAITING_PER_AGENT. */
export function limitsConfig(config: HubConfig): LimitsConfig {
  return {
    defaults: {
      key: { perSec: config.HUB_RATE_KEY_PER_SEC, burst: config.HUB_RATE_KEY_BURST },
      tenant: { perSec: config.HUB_RATE_TENANT_PER_SEC, burst: config.HUB_RATE_TENANT_BURST },
      maxWaitingPerAgent: config.HUB_MAX_WAITING_PER_AGENT,
    },
    address: { perSec: config.HUB_RATE_ADDRESS_PER_SEC, burst: config.HUB_RATE_ADDRESS_BURST },
    quotas: {
      agents_per_tenant: config.HUB_QUOTA_AGENTS_PER_TENANT,
      members_per_workspace: config.HUB_QUOTA_MEMBERS_PER_WORKSPACE,
      // 0: off.
      queued_deliveries_per_agent: config.HUB_QUOTA_QUEUED_DELIVERIES_PER_AGENT,
    },
  };
}

/**
 * Abuse resistance at the gateway: rate limits per API key, per tenant and (before
 * authentication) per client address, and a cap on each agent's waiting calls. A refusal answers
 * HTTP 429 with `Retry-After` and `RateLimit-*` headers and the JSON-RPC error -32029.
 */
export class Limits {
  private readonly buckets: Buckets;
  private readonly waiting: WaitingCalls;

  private readonly clientAddress: (peer: string, forwardedFor: string | undefined) => string;

  constructor(deps: { kv: Kv; identity: ClientOf<typeof identityv1.IdentityService>; config: LimitsConfig; trustedProxies?: ProxyTrust; metrics: Metrics; log: Logger }) {
    this.buckets = new Buckets(deps.kv, deps.identity, deps.config, deps.metrics, deps.log);
    this.clientAddress = clientAddressOf(deps.trustedProxies);
    this.waiting = new WaitingCalls(deps.kv, deps.log);
  }

  private address(ctx: Koa.Context): string {
    return this.clientAddress(ctx.socket.remoteAddress ?? ctx.ip, ctx.get('X-Forwarded-For') || undefined);
  }

  /** Before any lookup: refuses an address that used up its unauthenticated work. */
  preAuth(ctx: Koa.Context): boolean {
    const refusal = this.buckets.addressRefused(this.address(ctx));
    if (refusal) refuse(ctx, refusal, undefined, false);
    return !refusal;
  }

  /** Charges an Agent Card fetch to the caller's address, before the lookup. */
  async card(ctx: Koa.Context): Promise<boolean> {
    const refusal = await this.buckets.chargeAddress(this.address(ctx));
    if (refusal) refuse(ctx, refusal, undefined, false);
    return !refusal;
  }

  /** Charges a failed authentication; true when that answered 429 instead of 401. */
  async authFailed(ctx: Koa.Context, body: unknown): Promise<boolean> {
    const refusal = await this.buckets.chargeAddress(this.address(ctx));
    if (refusal) refuse(ctx, refusal, body, false);
    return Boolean(refusal);
  }

  /**
   * Admits an authenticated request: each of its calls counts against the key's and the tenant's
   * buckets, its waiting calls against the agent's cap (released when the response ends). The
   * key's bucket is named by the caller's key hash.
   */
  async admit(ctx: Koa.Context, caller: AgentCaller, body: unknown, strict: boolean): Promise<boolean> {
    const { principal } = caller;
    const limits = await this.buckets.limitsOf(principal.tenantId, principal);
    const calls = Array.isArray(body) ? Math.max(1, body.length) : 1;
    const keyId = caller.keyHash.slice(0, 32);
    const drawn = await this.buckets.request(principal.tenantId, keyId, calls, limits);
    if ('scope' in drawn) {
      refuse(ctx, drawn, body, strict);
      return false;
    }
    const waits = waitingCalls(body, strict);
    if (waits > 0) {
      const release = await this.waiting.acquire(principal.agentId, waits, limits.maxWaitingPerAgent);
      if (!release) {
        refuse(ctx, this.waitingRefused(principal.tenantId, limits.maxWaitingPerAgent), body, strict, tooManyWaiting(limits.maxWaitingPerAgent));
        return false;
      }
      // The client may have gone while the slots were acquired: its 'close' has passed then.
      if (ctx.res.closed) release();
      else ctx.res.once('close', release);
    }
    rateHeaders(ctx, drawn);
    return true;
  }

  /**
   * Holds a slot of the agent's waiting-call cap for one call made outside a request body that
   * `admit` saw: an MCP tool call, whose JSON-RPC call is only known once the MCP server has read
   * the message. A call that does not wait holds nothing. Past the cap, the error `admit` answers
   * each call with (-32029, `Too many waiting calls: …`, `data.retry_after_ms`).
   */
  async holdWaiting(principal: Principal, call: { method: string; params: unknown }): Promise<{ release: () => void } | { error: RpcError }> {
    if (principal.kind !== 'agent' || waitingCalls(call, false) === 0) return { release: () => {} };
    const limits = await this.buckets.limitsOf(principal.tenantId, principal);
    const release = await this.waiting.acquire(principal.agentId, 1, limits.maxWaitingPerAgent);
    if (release) return { release };
    const refusal = this.waitingRefused(principal.tenantId, limits.maxWaitingPerAgent);
    return { error: toRpcError(HubError.rateLimited(refusal.retryAfterMs, tooManyWaiting(limits.maxWaitingPerAgent))) };
  }

  /** A call past the waiting-call cap: counted, and retried after a second (slots free as calls end). */
  private waitingRefused(tenantId: string, max: number): Refusal {
    return this.buckets.refused('waiting', tenantId, { perSec: 0, burst: max }, 0, 1_000);
  }

  /** `tenants.set_limits` and `tenants.get_limits` of `POST /admin`. */
  adminMethods(): [string, RpcMethod][] {
    const tenant = z.object({ tenant_id: z.string().min(1).max(63) });
    const view = async (tenantId: string, principal: Principal) => {
      const overrides = await this.buckets.override(tenantId, principal, true);
      const limits = await this.buckets.limitsOf(tenantId, principal);
      return {
        tenant_id: tenantId,
        limits: {
          key: { per_sec: limits.key.perSec, burst: limits.key.burst },
          tenant: { per_sec: limits.tenant.perSec, burst: limits.tenant.burst },
          max_waiting_per_agent: limits.maxWaitingPerAgent,
          quotas: { ...this.buckets.config.quotas, ...overrides.quotas },
        },
        overrides,
      };
    };
    return [
      ['tenants.get_limits', {
        invoke: async (raw, ctx) => view(parseParams(tenant, raw).tenant_id, ctx.principal),
      }],
      ['tenants.set_limits', {
        // Replaces the tenant's overrides; what is left out falls back to the defaults.
        invoke: async (raw, ctx) => {
          const p = parseParams(tenant.extend({ limits: overrideSchema }).strict(), raw);
          await this.buckets.setOverride(p.tenant_id, p.limits, ctx.principal);
          return view(p.tenant_id, ctx.principal);
        },
      }],
    ];
  }
}

function tooManyWaiting(max: number): string {
  return `Too many waiting calls: an agent may hold at most ${max} long-polls, blocking sends and streams open at once`;
}

function rateHeaders(ctx: Koa.Context, at: Admission | Refusal): void {
  if (!Number.isFinite(at.limit)) return;
  ctx.set('RateLimit-Limit', String(at.limit));
  ctx.set('RateLimit-Remaining', String(Math.max(0, at.remaining)));
}

function refuse(ctx: Koa.Context, refusal: Refusal, body: unknown, strict: boolean, message?: string): void {
  const seconds = Math.max(1, Math.ceil(refusal.retryAfterMs / 1000));
  ctx.status = 429;
  ctx.set('Retry-After', String(seconds));
  rateHeaders(ctx, refusal);
  ctx.set('RateLimit-Reset', String(seconds));
  const err = HubError.rateLimited(refusal.retryAfterMs, message ?? `Rate limit exceeded (${refusal.scope}); retry after ${seconds} s`);
  const error = strict ? toA2aRpcError(err) : toRpcError(err);
  const answer = (call: unknown) => ({ jsonrpc: '2.0', id: idOf(call), error });
  ctx.body = Array.isArray(body) && body.length > 0 ? body.map(answer) : answer(body);
}

function idOf(call: unknown): string | number | null {
  if (call && typeof call === 'object' && !Array.isArray(call)) {
    const id = (call as { id?: unknown }).id;
    if (typeof id === 'string' || typeof id === 'number') return id;
  }
  return null;
}
