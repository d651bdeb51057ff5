import { createHash, randomBytes } from 'node:crypto';

const ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyz';

/**
 * Random bytes for ids, taken from a pool refilled 4 KiB at a time: one system call per ~200 ids
 * rather than one per id, which cost every request (its request id) more than its JSON parse.
 * Ids are not secrets; newSecret reads bytes of its own.
 */
const ID_POOL_BYTES = 4096;
let idPool = Buffer.alloc(0);
let idPoolUsed = 0;

function idBytes(length: number): Buffer {
  if (idPoolUsed + length > idPool.length) {
    idPool = randomBytes(Math.max(ID_POOL_BYTES, length));
    idPoolUsed = 0;
  }
  const bytes = idPool.subarray(idPoolUsed, idPoolUsed + length);
  idPoolUsed += length;
  return bytes;
}

/** A random id with `prefix_` and 20 base-36 characters (about 103 bits). */
export function newId(prefix: string, length = 20): string {
  const bytes = idBytes(length);
  let out = '';
  for (let i = 0; i < length; i++) out += ALPHABET[bytes[i]! % 36];
  return `${prefix}_${out}`;
}

/** A secret token: `prefix_` and 32 random bytes in base64url. */
export function newSecret(prefix: string): string {
  return `${prefix}_${randomBytes(32).toString('base64url')}`;
}

export function sha256Hex(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}
