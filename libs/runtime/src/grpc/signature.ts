import { createHmac, createSecretKey, randomBytes, timingSafeEqual, type KeyObject } from 'node:crypto';
import type { Metadata } from '@grpc/grpc-js';
import type { commonv1 } from '@agenthub/proto';
// Not from config.js, which imports the gRPC server: config-error.js breaks the cycle.
import { ConfigError } from '../config-error.js';
import { HubError, Reason } from '../errors.js';
import { principalFields, principalOf, readPrincipal, writePrincipal, type Principal } from './principal.js';

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
  // The HMAC was the largest cost of an internal call the hub adds to grpc-js (a tenth of it in a
  // loopback benchmark, counting both sides). The signed text holds the expiry rounded up to the
  // second, so under load the same caller's calls of one method share a text; the signatures made
  // and checked lately are kept, keyed by that text: a hit needs the same method, principal and
  // second of expiry.
  readonly #made = new Map<string, string>();
  readonly #checked = new Map<string, Buffer>();

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

  /** The signature of one call (the method, who it acts for, and the second it expires in) under the signing key. */
  mac(path: string, principal: Principal | undefined, expiresMs: number): Buffer {
    return hmac(this.#keys[0]!, signedText(path, principal, expiresMs));
  }

  /** `mac` as a call carries it (`v1.` and base64url), from the recent ones when it was made lately. */
  signature(path: string, principal: Principal | undefined, expiresMs: number): string {
    const text = signedText(path, principal, expiresMs);
    let signature = this.#made.get(text);
    if (signature === undefined) {
      signature = `${VERSION}.${hmac(this.#keys[0]!, text).toString('base64url')}`;
      remember(this.#made, text, signature);
    }
    return signature;
  }

  /** Whether `signature` is the call's under any accepted key; constant time per key. */
  accepts(signature: Buffer, path: string, principal: Principal | undefined, expiresMs: number): boolean {
    const text = signedText(path, principal, expiresMs);
    const known = this.#checked.get(text);
    if (known && signature.length === known.length && timingSafeEqual(signature, known)) return true;
    // Not the one checked last for this text: during a rotation the other key's may come next.
    let accepted: Buffer | undefined;
    for (const key of this.#keys) {
      const expected = hmac(key, text);
      if (signature.length === expected.length && timingSafeEqual(signature, expected)) accepted = expected;
    }
    if (accepted) remember(this.#checked, text, accepted);
    return accepted !== undefined;
  }
}

/** Most signatures kept on each side; past it the memory starts over (old expiries go with it). */
const REMEMBERED_SIGNATURES = 4096;

function remember<V>(memory: Map<string, V>, text: string, value: V): void {
  if (memory.size >= REMEMBERED_SIGNATURES) memory.clear();
  memory.set(text, value);
}

function signedText(path: string, principal: Principal | undefined, expiresMs: number): string {
  const fields =
    principal?.kind === 'agent'
      ? ['agent', principal.agentId, principal.tenantId]
      : principal?.kind === 'operator'
        ? ['operator', '', '']
        : ['none', '', ''];
  // JSON keeps the fields apart whatever they contain.
  return JSON.stringify([VERSION, path, ...fields, Math.ceil(expiresMs / 1000) * 1000]);
}

function hmac(key: KeyObject, text: string): Buffer {
  return createHmac('sha256', key).update(text).digest();
}

/** Puts the principal, the expiry and their signature on an outgoing call's metadata. */
export function signCall(key: InternalKey, metadata: Metadata, path: string, principal: Principal | undefined, deadline: Date): void {
  if (principal) writePrincipal(principal, metadata);
  // The exact deadline travels; the signature covers its second (see signedText), so a caller
  // could move it only within that second, which the signature bounds anyway.
  const expires = deadline.getTime();
  metadata.set(EXPIRES, String(expires));
  metadata.set(SIGNATURE, key.signature(path, principal, expires));
}

/**
 * The principal of an incoming call on `path`, once its signature is checked: refused
 * (UNAUTHENTICATED) when unsigned, signed with another key, or for another method, principal or
 * expiry, or when expired. Nothing of the metadata is trusted before this returns.
 */
export function verifyCall(key: InternalKey, metadata: Metadata, path: string, now = Date.now()): { principal: Principal | undefined; expires: Date } {
  const signature = metadata.get(SIGNATURE)[0];
  const expiresText = metadata.get(EXPIRES)[0];
  if (typeof signature !== 'string' || typeof expiresText !== 'string' || !/^\d{1,15}$/.test(expiresText)) throw refused();
  return verified(key, signature, Number(expiresText), readPrincipal(metadata), path, now);
}

/** What a call of a group carries instead of metadata. */
export type GroupedSignature = Omit<commonv1.CallSignature, '$typeName' | '$unknown'>;

/**
 * One call of a group (a grouped twin such as SendMessages) signed as `signCall` would sign it
 * alone: the same text, so the service checks it the same way and it grants no more than that call.
 */
export function signGrouped(key: InternalKey, path: string, principal: Principal | undefined, deadline: Date, traceparent = ''): GroupedSignature {
  const expires = deadline.getTime();
  return {
    ...principalFields(principal),
    expiresMs: BigInt(expires),
    signature: key.signature(path, principal, expires),
    traceparent,
  };
}

/** `verifyCall` for one call of a group, on the single method's `path`. */
export function verifyGrouped(key: InternalKey, signed: GroupedSignature | undefined, path: string, now = Date.now()): { principal: Principal | undefined; expires: Date } {
  if (!signed || signed.expiresMs < 0n || signed.expiresMs >= 10n ** 15n) throw refused();
  return verified(key, signed.signature, Number(signed.expiresMs), principalOf(signed), path, now);
}

function verified(key: InternalKey, signature: string, expires: number, principal: Principal | undefined, path: string, now: number): { principal: Principal | undefined; expires: Date } {
  if (!signature.startsWith(`${VERSION}.`)) throw refused();
  const given = Buffer.from(signature.slice(VERSION.length + 1), 'base64url');
  if (!key.accepts(given, path, principal, expires)) throw refused();
  if (expires + CLOCK_SKEW_MS <= now) throw new HubError(Reason.UNAUTHENTICATED, 'The internal call\'s signature has expired');
  return { principal, expires: new Date(expires) };
}

function refused(): HubError {
  return new HubError(Reason.UNAUTHENTICATED, 'Internal calls must be signed with the internal key');
}
