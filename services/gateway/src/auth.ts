import { createHash, timingSafeEqual } from 'node:crypto';
import { identityv1 } from '@agenthub/proto';
import { authCacheKey, HubError, REVOKED_KEY_TOMBSTONE, sha256Hex, type ClientOf, type Kv, type Principal } from '@agenthub/runtime';
import type { AuthMemory } from './auth-memory.js';

/** API keys are `ahk_` and 43 base64url characters; anything else fails without a lookup. */
const API_KEY_SHAPE = /^ahk_[A-Za-z0-9_-]{43}$/;

export function bearerToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1];
}

/** The principal an API key stands for: always an agent (operators present the admin token). */
export type AgentPrincipal = Extract<Principal, { kind: 'agent' }>;

/** An authenticated agent, and its API key's SHA-256 (hex), which also names the key's rate-limit bucket. */
export interface AgentCaller {
  principal: AgentPrincipal;
  keyHash: string;
}

/**
 * Resolves `Authorization: Bearer <API key>` to an agent principal: from this gateway's memory
 * (`memory`, when given) or the shared Kv cache when the key was seen within HUB_AUTH_CACHE_MS,
 * else from the identity service. `signal` is the request's: every lookup stops when it aborts.
 */
export class Authenticator {
  constructor(
    private readonly identity: ClientOf<typeof identityv1.IdentityService>,
    private readonly kv: Kv,
    private readonly cacheMs: number,
    private readonly memory?: AuthMemory,
  ) {}

  async agent(authorization: string | undefined, signal?: AbortSignal): Promise<AgentCaller> {
    const key = bearerToken(authorization);
    if (!key || !API_KEY_SHAPE.test(key)) throw HubError.unauthenticated();
    const keyHash = sha256Hex(key);
    const remembered = this.memory?.get(keyHash);
    if (remembered) return { principal: remembered, keyHash };
    const epoch = this.memory?.snapshot() ?? 0;
    const principal = await this.lookUp(key, keyHash, signal);
    this.memory?.fill(keyHash, principal, epoch);
    return { principal, keyHash };
  }

  private async lookUp(key: string, keyHash: string, signal?: AbortSignal): Promise<AgentPrincipal> {
    const cacheKey = authCacheKey(keyHash);
    if (this.cacheMs > 0) {
      const cached = await this.kv.get(cacheKey, signal);
      if (cached === REVOKED_KEY_TOMBSTONE) throw HubError.unauthenticated();
      if (cached) {
        const { agentId, tenantId } = JSON.parse(cached) as { agentId: string; tenantId: string };
        return { kind: 'agent', agentId, tenantId };
      }
    }
    const { principal } = await this.identity.authenticate({ apiKey: key }, { signal });
    if (!principal) throw HubError.unauthenticated();
    if (this.cacheMs > 0) {
      // Only fill an empty entry: a revocation's tombstone written meanwhile must win.
      await this.kv.setIfAbsent(cacheKey, JSON.stringify({ agentId: principal.agentId, tenantId: principal.tenantId }), this.cacheMs, signal);
    }
    return { kind: 'agent', agentId: principal.agentId, tenantId: principal.tenantId };
  }
}

/** Constant-time comparison of the presented operator token with the configured one. */
export function isOperator(authorization: string | undefined, adminToken: string): boolean {
  const presented = bearerToken(authorization);
  if (!presented) return false;
  const a = createHash('sha256').update(presented).digest();
  const b = createHash('sha256').update(adminToken).digest();
  return timingSafeEqual(a, b);
}
