import { createCipheriv, createDecipheriv, createSecretKey, randomBytes, type KeyObject } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ConfigError, ensurePrivateFile, type Logger } from '@agenthub/runtime';

/** A data key as stored: wrapped (encrypted) under one version of the key-encryption key. */
export interface WrappedKey {
  /** e.g. `v2`. */
  kekVersion: string;
  wrapped: Buffer;
}

/**
 * Wraps and unwraps workspace data keys under a key-encryption key (KEK). The local adapter
 * holds versioned KEKs from configuration; a KMS adapter (AWS KMS, GCP KMS, Vault transit)
 * implements the same three members. `workspaceId` is bound to the wrapping, so a wrapped key
 * copied to another workspace does not unwrap.
 */
export interface KeyWrapper {
  /** The version new wraps use: the newest. RotateKek rewraps every data key to it. */
  readonly currentVersion: string;
  wrap(dataKey: Buffer, workspaceId: string): Promise<WrappedKey>;
  /** Fails with UnknownKekVersionError or KeyUnwrapError; never returns a wrong key. */
  unwrap(key: WrappedKey, workspaceId: string): Promise<Buffer>;
}

/** The data key was wrapped with a KEK version this process does not hold. */
export class UnknownKekVersionError extends Error {
  override readonly name = 'UnknownKekVersionError';
  constructor(readonly workspaceId: string, readonly kekVersion: string) {
    super(`The data key of ${workspaceId} is wrapped with KEK version "${kekVersion}", which is not configured (HUB_KEKS)`);
  }
}

/** The wrapped data key failed authentication: tampered, moved, or wrapped by another KEK. */
export class KeyUnwrapError extends Error {
  override readonly name = 'KeyUnwrapError';
  constructor(readonly workspaceId: string, readonly kekVersion: string) {
    super(`The data key of ${workspaceId} (KEK ${kekVersion}) failed authentication: tampered, copied from another workspace, or wrapped by a different KEK`);
  }
}

export const KEK_BYTES = 32;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const VERSION = /^v([1-9][0-9]{0,8})$/;
const BASE64_32 = /^[A-Za-z0-9+/_-]{43}=?$/;

function wrapAad(workspaceId: string, kekVersion: string): Buffer {
  return Buffer.from(`agenthub/secrets/dek/v1\0${workspaceId}\0${kekVersion}`, 'utf8');
}

/**
 * KEKs held in process memory, from `HUB_KEKS` or the embedded key file. Wrapping is
 * AES-256-GCM: `nonce(12) ‖ ciphertext(32) ‖ tag(16)`, with the workspace id and KEK version as
 * additional authenticated data.
 */
export class LocalKeyWrapper implements KeyWrapper {
  readonly currentVersion: string;
  // KeyObjects, made once: Node 24 takes a slower path for a Buffer key on every cipher, about ten
  // times the cost of the AES-GCM itself for a 32-byte data key.
  private readonly keks: ReadonlyMap<string, KeyObject>;

  constructor(keks: ReadonlyMap<string, Buffer>) {
    if (keks.size === 0) throw new ConfigError('At least one key-encryption key is needed');
    let newest = 0;
    for (const [version, key] of keks) {
      const number = VERSION.exec(version)?.[1];
      if (!number) throw new ConfigError(`KEK version "${version}" must be v followed by a positive number`);
      if (key.length !== KEK_BYTES) throw new ConfigError(`KEK ${version} must be ${KEK_BYTES} bytes`);
      newest = Math.max(newest, Number(number));
    }
    this.keks = new Map([...keks].map(([version, key]) => [version, createSecretKey(key)]));
    this.currentVersion = `v${newest}`;
  }

  /** The versions held, newest first. */
  get versions(): string[] {
    return [...this.keks.keys()].sort((a, b) => Number(b.slice(1)) - Number(a.slice(1)));
  }

  /**
   * Parses `v2:<base64>,v1:<base64>` (commas or whitespace between entries). Problems are
   * reported by entry number and version, never with the key material.
   */
  static parse(text: string, source = 'HUB_KEKS'): LocalKeyWrapper {
    const entries = text.split(/[\s,]+/).filter(Boolean);
    const keks = new Map<string, Buffer>();
    entries.forEach((entry, index) => {
      const colon = entry.indexOf(':');
      const version = colon > 0 ? entry.slice(0, colon) : '';
      const material = colon > 0 ? entry.slice(colon + 1) : '';
      const where = `${source} entry ${index + 1}`;
      if (!VERSION.test(version)) throw new ConfigError(`${where}: must look like v<number>:<base64 of ${KEK_BYTES} bytes>`);
      if (!BASE64_32.test(material)) throw new ConfigError(`${where} (${version}): the key must be ${KEK_BYTES} bytes in base64`);
      if (keks.has(version)) throw new ConfigError(`${where}: version ${version} is listed twice`);
      keks.set(version, Buffer.from(material, 'base64'));
    });
    if (keks.size === 0) throw new ConfigError(`${source} holds no key-encryption key`);
    return new LocalKeyWrapper(keks);
  }

  /** A fresh random KEK as a `v<version>:<base64>` entry, for the embedded key file and operators. */
  static generateEntry(version = 1): string {
    return `v${version}:${randomBytes(KEK_BYTES).toString('base64')}`;
  }

  async wrap(dataKey: Buffer, workspaceId: string): Promise<WrappedKey> {
    const kekVersion = this.currentVersion;
    const kek = this.keks.get(kekVersion)!;
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv('aes-256-gcm', kek, nonce);
    cipher.setAAD(wrapAad(workspaceId, kekVersion));
    const sealed = Buffer.concat([cipher.update(dataKey), cipher.final()]);
    return { kekVersion, wrapped: Buffer.concat([nonce, sealed, cipher.getAuthTag()]) };
  }

  async unwrap(key: WrappedKey, workspaceId: string): Promise<Buffer> {
    const kek = this.keks.get(key.kekVersion);
    if (!kek) throw new UnknownKekVersionError(workspaceId, key.kekVersion);
    if (key.wrapped.length !== NONCE_BYTES + KEK_BYTES + TAG_BYTES) throw new KeyUnwrapError(workspaceId, key.kekVersion);
    const nonce = key.wrapped.subarray(0, NONCE_BYTES);
    const tag = key.wrapped.subarray(key.wrapped.length - TAG_BYTES);
    const sealed = key.wrapped.subarray(NONCE_BYTES, key.wrapped.length - TAG_BYTES);
    try {
      const decipher = createDecipheriv('aes-256-gcm', kek, nonce);
      decipher.setAAD(wrapAad(workspaceId, key.kekVersion));
      decipher.setAuthTag(tag);
      return Buffer.concat([decipher.update(sealed), decipher.final()]);
    } catch {
      throw new KeyUnwrapError(workspaceId, key.kekVersion);
    }
  }
}

/** Where the embedded mode keeps its generated KEK. */
export const KEK_FILE = 'secrets-kek';

/**
 * The KEKs of this process: `HUB_KEKS` when set; else, when `generate` is allowed (all-in-one
 * and single-process embedded mode), `<dataDir>/secrets-kek`, created on first start with a
 * random `v1` key and mode 0600. Using the file always logs a warning: production must supply
 * its own KEKs, and losing the file loses every secret.
 */
export async function loadKeyWrapper(options: {
  keks?: string | undefined;
  dataDir: string;
  generate: boolean;
  log: Logger;
}): Promise<LocalKeyWrapper> {
  if (options.keks) return LocalKeyWrapper.parse(options.keks);
  if (!options.generate) throw new ConfigError('The secrets service needs HUB_KEKS (key-encryption keys) in split mode with a shared database');
  const path = join(options.dataDir, KEK_FILE);
  let text = await readKekFile(path);
  let created = false;
  if (text === undefined) {
    await mkdir(options.dataDir, { recursive: true, mode: 0o700 });
    try {
      await writeFile(path, `${LocalKeyWrapper.generateEntry(1)}\n`, { mode: 0o600, flag: 'wx' });
      created = true;
    } catch (err) {
      // Another process wrote it first: its key wins.
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    text = (await readKekFile(path)) ?? '';
  }
  await ensurePrivateFile(path, options.log, 'secrets KEK file');
  const wrapper = LocalKeyWrapper.parse(text, path);
  options.log.warn(
    { path, created, kekVersion: wrapper.currentVersion },
    'No HUB_KEKS configured: secrets are protected by a key-encryption key kept in the data directory. ' +
      'Production must supply its own (HUB_KEKS or a KMS); losing this file makes every secret unreadable.',
  );
  return wrapper;
}

async function readKekFile(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}
