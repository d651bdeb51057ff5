import { createHmac, createSecretKey, randomBytes, timingSafeEqual, type KeyObject } from 'node:crypto';
import type { Metadata } from '@grpc/grpc-js';
// Not from config.js, which imports the gRPC server: config-error.js breaks the cycle.
import { ConfigError } from '../config-error.js';
import { HubError, Reason } from '../errors.js';
import { readPrincipal, writePrincipal, type Principal } from './principal.js';

const SIGNATURE = 'x-hub-signature';
const EXPIRES = 'x-hub-expires';
const VERSION = 'v1';
/** Fewest random bytes an internal key may have. */
const MIN_INTERNAL_KEY_BYTES = 32;
/** How far apart the clocks of caller and service may be before a fresh call looks expired. */
const CLOCK_SKEW_MS = 5_000;

/**
 * The key every internal gRPC call is signed with (HUB_INTERNAL_KEY; in the all-in-one mode, a
 * random one per process), and any previous keys still accepted during a rotation. Held in a
 * private field, so logging an object that carries it shows nothing of it.
 */
export class InternalKey {
  // KeyObjects, imported once: an HMAC keyed with a Buffer imports it on every call, which cost
  // six times the HMAC itself, twice per internal call (signed by the caller, checked by the service).
  readonly #keys: readonly KeyObject[];

  private constructor(keys: Buffer[]) {
    this.#keys = keys.map((key) => createSecretKey(key));
  }

  /** A fresh random key, for a process whose services call only each other. */
  static generate(): InternalKey {
    return new InternalKey([randomBytes(MIN_INTERNAL_KEY_BYTES)]);
  }

  /**
   * HUB_INTERNAL_KEY's value: base64 of at least 32 random bytes, or during a rotation
   * `<new>,<old>`: calls are signed with the first and accepted under any. Messages never echo it.
   */
  static fromBase64(text: string): InternalKey {
    const keys = text.split(',').map((part) => {
      const key = Buffer.from(part.trim(), 'base64');
      if (!/^[A-Za-z0-9+/]+={0,2}$/.test(part.trim()) || key.length < MIN_INTERNAL_KEY_BYTES) {
        throw new ConfigError(`HUB_INTERNAL_KEY must be base64 of at least ${MIN_INTERNAL_KEY_BYTES} random bytes (openssl rand -base64 32), or two such keys "<new>,<old>" during a rotation`);
      }
      return key;
    });
    return new InternalKey(keys);
  }

  /** The signature of one call (the method, who it acts for, and until when) under the signing key. */
  mac(path: string, principal: Principal | undefined, expiresMs: number): Buffer {
    return mac(this.#keys[0]!, path, principal, expiresMs);
  }

  /** Whether `signature` is the call's under any accepted key; constant time per key. */
  accepts(signature: Buffer, path: string, principal: Principal | undefined, expiresMs: number): boolean {
    let ok = false;
    for (const key of this.#keys) {
      const expected = mac(key, path, principal, expiresMs);
      if (signature.length === expected.length && timingSafeEqual(signature, expected)) ok = true;
    }
    return ok;
  }
}

function mac(key: KeyObject, path: string, principal: Principal | undefined, expiresMs: number): Buffer {
  const fields =
    principal?.kind === 'agent'
      ? ['agent', principal.agentId, principal.tenantId]
      : principal?.kind === 'operator'
        ? ['operator', '', '']
        : ['none', '', ''];
  // JSON keeps the fields apart whatever they contain.
  return createHmac('sha256', key).update(JSON.stringify([VERSION, path, ...fields, expiresMs])).digest();
}

/** Puts the principal, the expiry and their signature on an outgoing call's metadata. */
export function signCall(key: InternalKey, metadata: Metadata, path: string, principal: Principal | undefined, deadline: Date): void {
  if (principal) writePrincipal(principal, metadata);
  const expires = deadline.getTime();
  metadata.set(EXPIRES, String(expires));
  metadata.set(SIGNATURE, `${VERSION}.${key.mac(path, principal, expires).toString('base64url')}`);
}

/**
 * The principal of an incoming call on `path`, once its signature is checked: refused
 * (UNAUTHENTICATED) when unsigned, signed with another key, or for another method, principal or
 * expiry, or when expired. Nothing of the metadata is trusted before this returns.
 */
export function verifyCall(key: InternalKey, metadata: Metadata, path: string, now = Date.now()): { principal: Principal | undefined; expires: Date } {
  const refuse = () => new HubError(Reason.UNAUTHENTICATED, 'Internal calls must be signed with the internal key');
  const signature = metadata.get(SIGNATURE)[0];
  const expiresText = metadata.get(EXPIRES)[0];
  if (typeof signature !== 'string' || !signature.startsWith(`${VERSION}.`) || typeof expiresText !== 'string' || !/^\d{1,15}$/.test(expiresText)) {
    throw refuse();
  }
  const expires = Number(expiresText);
  const principal = readPrincipal(metadata);
  const given = Buffer.from(signature.slice(VERSION.length + 1), 'base64url');
  if (!key.accepts(given, path, principal, expires)) throw refuse();
  if (expires + CLOCK_SKEW_MS <= now) throw new HubError(Reason.UNAUTHENTICATED, 'The internal call\'s signature has expired');
  return { principal, expires: new Date(expires) };
}
