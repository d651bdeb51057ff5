/**
 * The gateway caches "API key hash → principal" in the Kv for HUB_AUTH_CACHE_MS, filling an
 * entry only when the key holds none. Revoking a key overwrites its entry with a tombstone that
 * outlives any cache entry, before the revocation is answered: so a revoked key fails on the
 * very next call, even when a lookup that started before the revocation finishes after it, and
 * with several gateway replicas (they share Redis).
 */
export function authCacheKey(apiKeyHash: string): string {
  return `auth:${apiKeyHash}`;
}

export const REVOKED_KEY_TOMBSTONE = 'revoked';

/** Upper bound of HUB_AUTH_CACHE_MS; the tombstone lives longer than any cached entry. */
export const MAX_AUTH_CACHE_MS = 60 * 60 * 1000;
export const TOMBSTONE_TTL_MS = 2 * MAX_AUTH_CACHE_MS;

/**
 * Gateways also keep entries in process memory, in front of the Kv (no round trip per call).
 * Revocation reaches them on this channel: after writing the tombstone, identity publishes the
 * key's hash here and waits AUTH_LOCAL_LEASE_MS before answering. A gateway trusts its memory
 * only while it has, within the last AUTH_LOCAL_LEASE_MS, received back a ping it published on
 * this channel: pub/sub keeps order, so such a ping, sent after the revocation was published,
 * arrives after it, and the entry is gone by then. A gateway whose subscription broke or lags
 * gets no recent ping and falls back to the Kv, where the tombstone already is; one whose
 * subscription dropped and came back (losing what was published meanwhile) empties its memory.
 */
export const AUTH_REVOKED_CHANNEL = 'auth:revoked';
export const AUTH_LOCAL_LEASE_MS = 500;
