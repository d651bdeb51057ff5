import { AUTH_LOCAL_LEASE_MS, AUTH_REVOKED_CHANNEL, authCacheKey, HubError, newId, newSecret, Reason, REVOKED_KEY_TOMBSTONE, sha256Hex, TOMBSTONE_TTL_MS, type Kv } from '@agenthub/runtime';
import type { ApiKeyRecord, IdentityStore, KeyOwner } from './store.js';

const KEY_PREFIX = 'ahk';
// Enough to recognise a key in a listing (`ahk_` and 8 random characters), far too little to guess it.
const SHOWN_PREFIX_LENGTH = 12;
// Anything else cannot be a key this service issued, so it is refused without a lookup.
const KEY_SHAPE = /^ahk_[A-Za-z0-9_-]{16,256}$/;

export interface IssuedKey {
  key: ApiKeyRecord;
  /** The secret itself: returned once, never stored. */
  apiKey: string;
}

/** Issues a key for an existing agent; undefined when the agent does not exist. */
export async function issueKey(store: IdentityStore, signal: AbortSignal, agentId: string): Promise<IssuedKey | undefined> {
  const apiKey = newSecret(KEY_PREFIX);
  const key = await store.insertKey(signal, {
    id: newId('key'),
    agentId,
    keyHash: sha256Hex(apiKey),
    prefix: apiKey.slice(0, SHOWN_PREFIX_LENGTH),
    at: Date.now(),
  });
  return key && { key, apiKey };
}

export async function createApiKey(store: IdentityStore, signal: AbortSignal, agentId: string): Promise<IssuedKey> {
  const issued = await issueKey(store, signal, agentId);
  if (!issued) throw new HubError(Reason.NOT_FOUND, 'Agent not found');
  return issued;
}

/**
 * Revokes the key (a no-op when it already is) and replaces the gateway's cached lookup of it
 * with a tombstone, and drops it from every gateway's memory, before answering, so the key fails
 * on the very next request (see auth-cache.ts). The tombstone is written on every call, so retrying a revocation whose cache
 * write failed completes it.
 */
export async function revokeApiKey(store: IdentityStore, signal: AbortSignal, kv: Kv, keyId: string): Promise<ApiKeyRecord> {
  const revoked = await store.revokeKey(signal, keyId, Date.now());
  if (!revoked) throw new HubError(Reason.NOT_FOUND, 'API key not found');
  await kv.set(authCacheKey(revoked.keyHash), REVOKED_KEY_TOMBSTONE, TOMBSTONE_TTL_MS);
  // Gateways' in-memory entries: published, then one lease, after which every gateway that still
  // trusts its memory has dropped the entry (auth-cache.ts); the margin covers timer rounding.
  await kv.publish(AUTH_REVOKED_CHANNEL, revoked.keyHash);
  await new Promise((resolve) => setTimeout(resolve, AUTH_LOCAL_LEASE_MS + 50));
  return revoked.key;
}

export async function listApiKeys(store: IdentityStore, signal: AbortSignal, agentId: string): Promise<ApiKeyRecord[]> {
  if (!(await store.agent(signal, agentId))) throw new HubError(Reason.NOT_FOUND, 'Agent not found');
  return store.keys(signal, agentId);
}

/** The agent an active key belongs to. One answer for every failure, so callers learn nothing. */
export async function authenticate(store: IdentityStore, signal: AbortSignal, apiKey: string): Promise<KeyOwner> {
  const owner = KEY_SHAPE.test(apiKey) ? await store.ownerOfKey(signal, sha256Hex(apiKey)) : undefined;
  if (!owner) throw HubError.unauthenticated();
  return owner;
}
