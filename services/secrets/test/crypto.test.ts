import { mkdtemp, readFile, rm, stat, writeFile, chmod } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { ConfigError, createLogger, Reason } from '@agenthub/runtime';
import { backends, type Backend } from '@agenthub/testing';
import { KEK_FILE, KeyUnwrapError, LocalKeyWrapper, loadKeyWrapper, UnknownKekVersionError } from '../src/index.js';
import { open, seal, newDataKey, SecretIntegrityError } from '../src/seal.js';
import { checkLogsForLeaks, secretValue } from './capture.js';
import { failure, kekEntry, startStack, wrapper, type Stack, type TestAgent } from './harness.js';

const integrity = { reason: Reason.INTERNAL, message: 'Secret could not be decrypted: integrity check failed', field: '' };
const keyUnavailable = { reason: Reason.INTERNAL, message: 'Secret could not be decrypted: the workspace key is unavailable', field: '' };

describe('sealing', () => {
  test('a value opens only under its own data key, workspace and key', () => {
    const dataKey = newDataKey();
    const sealed = seal(dataKey, 'ws_a', 'k', 'hello');
    expect(open(dataKey, 'ws_a', 'k', sealed)).toBe('hello');
    expect(() => open(dataKey, 'ws_b', 'k', sealed)).toThrow(SecretIntegrityError);
    expect(() => open(dataKey, 'ws_a', 'k2', sealed)).toThrow(SecretIntegrityError);
    expect(() => open(newDataKey(), 'ws_a', 'k', sealed)).toThrow(SecretIntegrityError);
    const flipped = Buffer.from(sealed.ciphertext);
    flipped[0]! ^= 1;
    expect(() => open(dataKey, 'ws_a', 'k', { ...sealed, ciphertext: flipped })).toThrow(SecretIntegrityError);
    expect(() => open(dataKey, 'ws_a', 'k', { ...sealed, ciphertext: sealed.ciphertext.subarray(0, 10) })).toThrow(SecretIntegrityError);
    // The error names the secret, never the value.
    let thrown: unknown;
    try {
      open(dataKey, 'ws_b', 'k', sealed);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(SecretIntegrityError);
    expect((thrown as Error).message).toContain('"k" of ws_b');
    expect((thrown as Error).message).not.toContain('hello');
  });

  test('the same value sealed twice gives different nonces and ciphertexts', () => {
    const dataKey = newDataKey();
    const a = seal(dataKey, 'ws_a', 'k', 'same');
    const b = seal(dataKey, 'ws_a', 'k', 'same');
    expect(a.nonce.equals(b.nonce)).toBe(false);
    expect(a.ciphertext.equals(b.ciphertext)).toBe(false);
  });
});

describe('key-encryption keys', () => {
  test('HUB_KEKS: the highest version wraps, every listed one unwraps', async () => {
    const v2 = kekEntry(2);
    const v10 = kekEntry(10);
    const v9 = kekEntry(9);
    const old = LocalKeyWrapper.parse(v2);
    const dataKey = newDataKey();
    const wrappedOld = await old.wrap(dataKey, 'ws_a');
    expect(wrappedOld.kekVersion).toBe('v2');
    const both = LocalKeyWrapper.parse(` ${v9}, ${v2}\n${v10} `);
    expect(both.currentVersion).toBe('v10');
    expect(both.versions).toEqual(['v10', 'v9', 'v2']);
    expect((await both.unwrap(wrappedOld, 'ws_a')).equals(dataKey)).toBe(true);
    const wrappedNew = await both.wrap(dataKey, 'ws_a');
    expect(wrappedNew.kekVersion).toBe('v10');
    await expect(old.unwrap(wrappedNew, 'ws_a')).rejects.toThrow(UnknownKekVersionError);
    // Bound to its workspace, and authenticated.
    await expect(both.unwrap(wrappedNew, 'ws_b')).rejects.toThrow(KeyUnwrapError);
    const tampered = Buffer.from(wrappedNew.wrapped);
    tampered[20]! ^= 0x80;
    await expect(both.unwrap({ ...wrappedNew, wrapped: tampered }, 'ws_a')).rejects.toThrow(KeyUnwrapError);
  });

  test('bad HUB_KEKS entries are refused by position, never echoing key material', () => {
    const material = Buffer.alloc(32, 7).toString('base64');
    const cases: [string, string][] = [
      ['', 'HUB_KEKS holds no key-encryption key'],
      [material, 'HUB_KEKS entry 1: must look like v<number>:<base64 of 32 bytes>'],
      [`1:${material}`, 'HUB_KEKS entry 1: must look like v<number>:<base64 of 32 bytes>'],
      [`v0:${material}`, 'HUB_KEKS entry 1: must look like v<number>:<base64 of 32 bytes>'],
      [`v1:${material},v2:${material.slice(0, 20)}`, 'HUB_KEKS entry 2 (v2): the key must be 32 bytes in base64'],
      [`v1:${Buffer.alloc(16, 7).toString('base64')}`, 'HUB_KEKS entry 1 (v1): the key must be 32 bytes in base64'],
      [`v1:${material},v1:${material}`, 'HUB_KEKS entry 2: version v1 is listed twice'],
    ];
    for (const [text, message] of cases) {
      let thrown: unknown;
      try {
        LocalKeyWrapper.parse(text);
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(ConfigError);
      expect((thrown as Error).message).toBe(message);
      expect((thrown as Error).message).not.toContain(material.slice(0, 12));
    }
    // base64url is accepted too.
    expect(LocalKeyWrapper.parse(`v3:${Buffer.alloc(32, 250).toString('base64url')}`).currentVersion).toBe('v3');
  });

  test('embedded mode generates a KEK file with mode 0600 once, and warns every start', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'agenthub-kek-'));
    const lines: string[] = [];
    const log = createLogger({ level: 'debug', destination: new Writable({ write(c, _e, done) { lines.push(String(c)); done(); } }) });
    try {
      const first = await loadKeyWrapper({ dataDir: join(dir, 'data'), generate: true, log });
      const path = join(dir, 'data', KEK_FILE);
      expect((await stat(path)).mode & 0o777).toBe(0o600);
      const material = (await readFile(path, 'utf8')).trim();
      expect(material).toMatch(/^v1:[A-Za-z0-9+/]{43}=$/);
      const second = await loadKeyWrapper({ dataDir: join(dir, 'data'), generate: true, log });
      const dataKey = newDataKey();
      expect((await second.unwrap(await first.wrap(dataKey, 'ws_a'), 'ws_a')).equals(dataKey)).toBe(true);
      expect(lines).toHaveLength(2);
      for (const line of lines) {
        const entry = JSON.parse(line);
        expect(entry.level).toBe(40);
        expect(entry.msg).toContain('Production must supply its own');
        expect(line).not.toContain(material.slice(3));
      }
      expect(JSON.parse(lines[0]!).created).toBe(true);
      expect(JSON.parse(lines[1]!).created).toBe(false);

      // Loosened permissions are put back.
      await chmod(path, 0o644);
      await loadKeyWrapper({ dataDir: join(dir, 'data'), generate: true, log });
      expect((await stat(path)).mode & 0o777).toBe(0o600);

      // HUB_KEKS wins over the file; split mode without it refuses to start.
      const configured = kekEntry(4);
      expect((await loadKeyWrapper({ keks: configured, dataDir: join(dir, 'data'), generate: true, log })).currentVersion).toBe('v4');
      await expect(loadKeyWrapper({ dataDir: join(dir, 'other'), generate: false, log })).rejects.toThrow(ConfigError);
      // An operator may add a version to the file for rotation.
      await writeFile(path, `${material}\n${configured}\n`);
      expect((await loadKeyWrapper({ dataDir: join(dir, 'data'), generate: true, log })).currentVersion).toBe('v4');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe.each(backends().map((b) => [b.name, b] as const))('failing closed (%s)', (_name, backend: Backend) => {
  let stack: Stack;
  let owner: TestAgent;

  beforeAll(async () => {
    stack = await startStack(backend, { keyWrapper: wrapper(kekEntry(1)) });
    owner = await stack.agent('acme', 'Owner');
  });
  afterAll(async () => {
    await stack?.stop();
  });

  const get = (workspaceId: string, key: string) => stack.secrets.getSecret({ workspaceId, key }, owner.as);
  const set = (workspaceId: string, key: string, value: string) => stack.secrets.setSecret({ workspaceId, key, value }, owner.as);

  /** A workspace holding `a` and `b`; returns it and their values. */
  async function withSecrets() {
    const workspaceId = await stack.workspaceWith(owner);
    const values = { a: secretValue('a'), b: secretValue('b') };
    await set(workspaceId, 'a', values.a);
    await set(workspaceId, 'b', values.b);
    return { workspaceId, values };
  }

  async function expectFailsClosed(call: Promise<unknown>, expected: object, values: string[]) {
    const error = await failure(call);
    expect(error).toEqual(expected);
    for (const value of values) expect(JSON.stringify(error)).not.toContain(value);
  }

  test('a tampered ciphertext, tag or nonce does not open', async () => {
    const { workspaceId, values } = await withSecrets();
    // Flip one bit of the ciphertext body.
    await stack.db.query(
      `UPDATE secrets SET ciphertext = set_byte(ciphertext, 0, get_byte(ciphertext, 0) # 1) WHERE workspace_id = $1 AND key = 'a'`,
      [workspaceId],
    );
    await expectFailsClosed(get(workspaceId, 'a'), integrity, [values.a]);
    // Flip one bit of the nonce.
    await stack.db.query(`UPDATE secrets SET nonce = set_byte(nonce, 11, get_byte(nonce, 11) # 128) WHERE workspace_id = $1 AND key = 'b'`, [
      workspaceId,
    ]);
    await expectFailsClosed(get(workspaceId, 'b'), integrity, [values.b]);
    // Truncated.
    await stack.db.query(`UPDATE secrets SET ciphertext = substring(ciphertext from 1 for 8) WHERE workspace_id = $1 AND key = 'b'`, [workspaceId]);
    await expectFailsClosed(get(workspaceId, 'b'), integrity, [values.b]);
    // The rest of the service is unaffected, and setting the secret again repairs it.
    const repaired = secretValue('repaired');
    await set(workspaceId, 'a', repaired);
    expect((await get(workspaceId, 'a')).value).toBe(repaired);
  });

  test('a ciphertext moved to another key of the same workspace does not open (AAD)', async () => {
    const { workspaceId, values } = await withSecrets();
    await stack.db.query(`DELETE FROM secrets WHERE workspace_id = $1 AND key = 'b'`, [workspaceId]);
    await stack.db.query(`UPDATE secrets SET key = 'b' WHERE workspace_id = $1 AND key = 'a'`, [workspaceId]);
    await expectFailsClosed(get(workspaceId, 'b'), integrity, [values.a, values.b]);
  });

  test('a ciphertext copied to another workspace does not open, even with that workspace’s key', async () => {
    const source = await withSecrets();
    const target = await withSecrets();
    await stack.db.query(
      `UPDATE secrets t SET nonce = s.nonce, ciphertext = s.ciphertext
         FROM secrets s WHERE s.workspace_id = $1 AND s.key = 'a' AND t.workspace_id = $2 AND t.key = 'a'`,
      [source.workspaceId, target.workspaceId],
    );
    await expectFailsClosed(get(target.workspaceId, 'a'), integrity, [source.values.a, target.values.a]);
    // Even with the source's data key copied along, the AAD still binds the workspace.
    await stack.db.query(
      `UPDATE workspace_keys t SET wrapped_key = s.wrapped_key, kek_version = s.kek_version
         FROM workspace_keys s WHERE s.workspace_id = $1 AND t.workspace_id = $2`,
      [source.workspaceId, target.workspaceId],
    );
    await expectFailsClosed(get(target.workspaceId, 'a'), keyUnavailable, [source.values.a]);
    expect((await get(source.workspaceId, 'a')).value).toBe(source.values.a);
  });

  test('a data key wrapped under an unknown KEK version, or tampered with, fails closed for reads and writes', async () => {
    const { workspaceId, values } = await withSecrets();
    await stack.db.query(`UPDATE workspace_keys SET kek_version = 'v99' WHERE workspace_id = $1`, [workspaceId]);
    await expectFailsClosed(get(workspaceId, 'a'), keyUnavailable, [values.a]);
    await expectFailsClosed(set(workspaceId, 'c', secretValue()), keyUnavailable, []);
    await expectFailsClosed(stack.secrets.rotateWorkspaceKey({ workspaceId }, owner.as), keyUnavailable, []);
    await stack.db.query(`UPDATE workspace_keys SET kek_version = 'v1', wrapped_key = set_byte(wrapped_key, 30, get_byte(wrapped_key, 30) # 4) WHERE workspace_id = $1`, [
      workspaceId,
    ]);
    await expectFailsClosed(get(workspaceId, 'b'), keyUnavailable, [values.b]);
    // Listing needs no key and still works; nothing was written by the refused calls.
    expect((await stack.secrets.listSecrets({ workspaceId }, owner.as)).secrets.map((s) => s.key)).toEqual(['a', 'b']);
  });

  test('a workspace key rotation that meets a tampered value changes nothing', async () => {
    const { workspaceId, values } = await withSecrets();
    await stack.db.query(`UPDATE secrets SET ciphertext = set_byte(ciphertext, 0, get_byte(ciphertext, 0) # 1) WHERE workspace_id = $1 AND key = 'b'`, [
      workspaceId,
    ]);
    const before = await stack.db.query('SELECT generation, wrapped_key FROM workspace_keys WHERE workspace_id = $1', [workspaceId]);
    await expectFailsClosed(stack.secrets.rotateWorkspaceKey({ workspaceId }, owner.as), integrity, [values.a, values.b]);
    expect((await stack.db.query('SELECT generation, wrapped_key FROM workspace_keys WHERE workspace_id = $1', [workspaceId])).rows).toEqual(before.rows);
    expect((await get(workspaceId, 'a')).value).toBe(values.a);
  });
});

checkLogsForLeaks(['possible tampering', 'not configured (HUB_KEKS)', 'failed authentication']);
