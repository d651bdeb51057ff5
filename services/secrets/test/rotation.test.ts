import { workspacev1 } from '@agenthub/proto';
import { Reason } from '@agenthub/runtime';
import { backends, type Backend } from '@agenthub/testing';
import { LocalKeyWrapper, UnknownKekVersionError } from '../src/index.js';
import { checkLogsForLeaks, secretValue } from './capture.js';
import { failure, kekEntry, operator, startStack, wrapper, type Stack, type TestAgent } from './harness.js';

const { Role } = workspacev1;

interface CipherRow {
  workspace_id: string;
  key: string;
  nonce: Uint8Array;
  ciphertext: Uint8Array;
  key_generation: number;
}

describe.each(backends().map((b) => [b.name, b] as const))('rotation (%s)', (_name, backend: Backend) => {
  const v1 = kekEntry(1);
  const v2 = kekEntry(2);
  const v3 = kekEntry(3);
  let stack: Stack;
  /** The KEKs the running secrets service holds, newest first. */
  let live = [v1];
  const useKeks = (...entries: string[]) => {
    live = entries;
    return stack.restartSecrets(wrapper(...entries));
  };
  let owner: TestAgent;
  let writer: TestAgent;
  let admin: TestAgent;

  beforeAll(async () => {
    stack = await startStack(backend, { keyWrapper: wrapper(v1), limits: { rewrapBatchSize: 2 }, restartable: true });
    owner = await stack.agent('acme', 'Owner');
    writer = await stack.agent('acme', 'Writer');
    admin = await stack.agent('acme', 'Admin');
  });
  afterAll(async () => {
    await stack?.stop();
  });

  const get = async (workspaceId: string, key: string) => (await stack.secrets.getSecret({ workspaceId, key }, owner.as)).value;
  const set = (workspaceId: string, key: string, value: string, who = owner) => stack.secrets.setSecret({ workspaceId, key, value }, who.as);

  async function populate(workspaces: number, keys: number): Promise<Map<string, Map<string, string>>> {
    const all = new Map<string, Map<string, string>>();
    for (let w = 0; w < workspaces; w += 1) {
      const workspaceId = await stack.workspaceWith(owner, [[writer, Role.WRITE], [admin, Role.ADMIN]]);
      const values = new Map<string, string>();
      for (let k = 0; k < keys; k += 1) {
        const value = secretValue(`rot-${w}-${k}`);
        values.set(`key-${k}`, value);
        await set(workspaceId, `key-${k}`, value);
      }
      all.set(workspaceId, values);
    }
    return all;
  }

  async function expectReadable(all: Map<string, Map<string, string>>) {
    for (const [workspaceId, values] of all) {
      for (const [key, value] of values) expect(await get(workspaceId, key)).toBe(value);
    }
  }

  const cipherRows = async (workspaceIds: string[]) =>
    (
      await stack.db.query<CipherRow>(
        'SELECT workspace_id, key, nonce, ciphertext, key_generation FROM secrets WHERE workspace_id = ANY($1) ORDER BY workspace_id, key',
        [workspaceIds],
      )
    ).rows.map((r) => ({ ...r, nonce: Buffer.from(r.nonce).toString('hex'), ciphertext: Buffer.from(r.ciphertext).toString('hex') }));

  test('values survive a restart with the same KEK, and fail closed without it', async () => {
    const all = await populate(2, 2);
    await useKeks(v1);
    await expectReadable(all);
    await stack.restartSecrets(wrapper(kekEntry(1)));
    const [workspaceId] = [...all.keys()];
    expect(await failure(get(workspaceId!, 'key-0'))).toEqual({
      reason: Reason.INTERNAL,
      message: 'Secret could not be decrypted: the workspace key is unavailable',
      field: '',
    });
    await useKeks(v1);
    await expectReadable(all);
  });

  test('KEK rotation rewraps every data key under the newest version in batches, values untouched', async () => {
    const all = await populate(5, 2);
    const ids = [...all.keys()];
    const before = await cipherRows(ids);
    // The new version is configured first (every replica), then the rotation is run once.
    await useKeks(v2, v1);
    // New workspaces get their key wrapped under v2 straight away.
    const fresh = await stack.workspaceWith(owner);
    await set(fresh, 'new', secretValue());
    const versions = async () =>
      (await stack.db.query<{ kek_version: string }>('SELECT DISTINCT kek_version FROM workspace_keys ORDER BY 1')).rows.map((r) => r.kek_version);
    expect(await versions()).toEqual(['v1', 'v2']);

    const result = await stack.secrets.rotateKek({}, operator);
    expect(result.kekVersion).toBe('v2');
    expect(result.rewrapped).toBeGreaterThanOrEqual(5);
    const { rows } = await stack.db.query<{ count: number }>('SELECT count(*)::int AS count FROM workspace_keys');
    expect(result.total).toBe(rows[0]!.count);
    expect(await versions()).toEqual(['v2']);
    // Ciphertexts, nonces and generations are byte for byte what they were.
    expect(await cipherRows(ids)).toEqual(before);
    await expectReadable(all);
    expect((await stack.secrets.rotateKek({}, operator)).rewrapped).toBe(0);

    // The old KEK can now be retired.
    await useKeks(v2);
    await expectReadable(all);
  });

  test('KEK rotation while secrets are read and written loses nothing', async () => {
    await useKeks(v2);
    const all = await populate(4, 1);
    await useKeks(v3, v2);
    const ids = [...all.keys()];
    let stop = false;
    const traffic = (async () => {
      let round = 0;
      while (!stop) {
        for (const workspaceId of ids) {
          const value = secretValue('during-kek');
          all.get(workspaceId)!.set(`live-${round % 3}`, value);
          await set(workspaceId, `live-${round % 3}`, value, writer);
          expect(await get(workspaceId, 'key-0')).toBe(all.get(workspaceId)!.get('key-0'));
        }
        round += 1;
      }
      return round;
    })();
    const result = await stack.secrets.rotateKek({}, operator);
    stop = true;
    expect(await traffic).toBeGreaterThan(0);
    expect(result.kekVersion).toBe('v3');
    await expectReadable(all);
    await useKeks(v3);
    await expectReadable(all);
  });

  test('only the operator rotates the KEK', async () => {
    expect(await failure(stack.secrets.rotateKek({}, admin.as))).toEqual({ reason: Reason.ACCESS_DENIED, message: 'Operator access required', field: '' });
    expect(await failure(stack.secrets.rotateKek({}))).toEqual({ reason: Reason.ACCESS_DENIED, message: 'Operator access required', field: '' });
  });

  test('a data key that cannot be unwrapped is left as it was; the others are rewrapped', async () => {
    const all = await populate(3, 1);
    const [broken, ...fine] = [...all.keys()] as [string, ...string[]];
    const v4 = kekEntry(4);
    const previous = live[0]!.split(':')[0]!;
    await useKeks(v4, ...live);
    await stack.db.query(`UPDATE workspace_keys SET kek_version = 'v0' WHERE workspace_id = $1`, [broken]);
    const result = await stack.secrets.rotateKek({}, operator);
    expect(result).toMatchObject({ kekVersion: 'v4', failed: 1 });
    const versions = await stack.db.query<{ workspace_id: string; kek_version: string }>(
      'SELECT workspace_id, kek_version FROM workspace_keys WHERE workspace_id = ANY($1)',
      [[broken, ...fine]],
    );
    for (const row of versions.rows) expect(row.kek_version).toBe(row.workspace_id === broken ? 'v0' : 'v4');
    for (const workspaceId of fine) await expectReadable(new Map([[workspaceId, all.get(workspaceId)!]]));
    await stack.db.query(`UPDATE workspace_keys SET kek_version = $2 WHERE workspace_id = $1`, [broken, previous]);
    expect(await stack.secrets.rotateKek({}, operator)).toMatchObject({ rewrapped: 1, failed: 0 });
    await expectReadable(all);
    await useKeks(v4);
  });

  test('rotating a workspace key re-seals its values under a new data key', async () => {
    const all = await populate(2, 3);
    const [workspaceId, other] = [...all.keys()] as [string, string];
    const before = await cipherRows([workspaceId, other]);
    const keyBefore = await stack.db.query<{ wrapped_key: Uint8Array }>('SELECT wrapped_key FROM workspace_keys WHERE workspace_id = $1', [workspaceId]);

    const rotated = await stack.secrets.rotateWorkspaceKey({ workspaceId }, admin.as);
    expect(rotated).toMatchObject({ workspaceId, generation: 2, resealed: 3 });
    const after = await cipherRows([workspaceId, other]);
    for (const row of after.filter((r) => r.workspace_id === workspaceId)) {
      const old = before.find((r) => r.workspace_id === workspaceId && r.key === row.key)!;
      expect(row.key_generation).toBe(2);
      expect(row.ciphertext).not.toBe(old.ciphertext);
      expect(row.nonce).not.toBe(old.nonce);
    }
    // Other workspaces are untouched.
    expect(after.filter((r) => r.workspace_id === other)).toEqual(before.filter((r) => r.workspace_id === other));
    const keyAfter = await stack.db.query<{ wrapped_key: Uint8Array }>('SELECT wrapped_key FROM workspace_keys WHERE workspace_id = $1', [workspaceId]);
    expect(Buffer.from(keyAfter.rows[0]!.wrapped_key).equals(Buffer.from(keyBefore.rows[0]!.wrapped_key))).toBe(false);
    await expectReadable(all);
    // The operator may rotate too; a workspace without secrets has no key to rotate.
    expect(await stack.secrets.rotateWorkspaceKey({ workspaceId }, operator)).toMatchObject({ generation: 3, resealed: 3 });
    const empty = await stack.workspaceWith(owner);
    expect(await stack.secrets.rotateWorkspaceKey({ workspaceId: empty }, owner.as)).toMatchObject({ generation: 0, resealed: 0 });
    expect(await stack.secrets.rotateWorkspaceKey({ workspaceId: empty }, operator)).toMatchObject({ generation: 0, resealed: 0 });
    // A workspace that does not exist is refused, for the operator too (`agenthub secrets rotate-key` exits 1).
    expect(await failure(stack.secrets.rotateWorkspaceKey({ workspaceId: 'ws_doesnotexist' }, operator))).toEqual({ reason: Reason.NOT_FOUND, message: 'Workspace not found', field: '' });
    // The old ciphertexts do not open under the new key.
    await stack.db.query(
      'UPDATE secrets SET nonce = decode($3, \'hex\'), ciphertext = decode($4, \'hex\') WHERE workspace_id = $1 AND key = $2',
      [workspaceId, 'key-0', before.find((r) => r.workspace_id === workspaceId && r.key === 'key-0')!.nonce, before.find((r) => r.workspace_id === workspaceId && r.key === 'key-0')!.ciphertext],
    );
    expect((await failure(get(workspaceId, 'key-0'))).reason).toBe(Reason.INTERNAL);
  });

  test('sets racing a workspace key rotation all land, readable under the new key', async () => {
    const [workspaceId] = [...(await populate(1, 4)).keys()] as [string];
    const values = new Map<string, string>();
    const writes = Array.from({ length: 12 }, (_, i) => {
      const value = secretValue('race-rotation');
      values.set(`racing-${i % 4}`, value);
      return [`racing-${i % 4}`, value] as const;
    });
    const finals = new Map<string, Set<string>>();
    for (const [key, value] of writes) finals.set(key, (finals.get(key) ?? new Set()).add(value));
    await Promise.all([
      ...writes.map(([key, value]) => set(workspaceId, key, value, writer)),
      stack.secrets.rotateWorkspaceKey({ workspaceId }, owner.as),
      stack.secrets.rotateWorkspaceKey({ workspaceId }, admin.as),
    ]);
    const { rows } = await stack.db.query<{ generation: number }>('SELECT generation FROM workspace_keys WHERE workspace_id = $1', [workspaceId]);
    expect(rows[0]!.generation).toBe(3);
    const generations = await stack.db.query<{ key_generation: number }>('SELECT DISTINCT key_generation FROM secrets WHERE workspace_id = $1', [workspaceId]);
    expect(generations.rows).toEqual([{ key_generation: 3 }]);
    for (const [key, candidates] of finals) expect(candidates.has(await get(workspaceId, key))).toBe(true);
  });

  test('deleting a workspace destroys its data key: through DeleteWorkspaceSecrets, or on the next call', async () => {
    const all = await populate(2, 2);
    const [explicit, lazy] = [...all.keys()] as [string, string];
    const keyRows = async (workspaceId: string) => ({
      keys: (await stack.db.query('SELECT 1 FROM workspace_keys WHERE workspace_id = $1', [workspaceId])).rows.length,
      secrets: (await stack.db.query('SELECT 1 FROM secrets WHERE workspace_id = $1', [workspaceId])).rows.length,
    });

    // While the workspace exists, its owner is told to delete it first; others get the usual errors.
    expect(await failure(stack.secrets.deleteWorkspaceSecrets({ workspaceId: explicit }, owner.as))).toEqual({
      reason: Reason.INVALID_OPERATION,
      message: 'Delete the workspace first: its secrets go with it',
      field: '',
    });
    expect(await failure(stack.secrets.deleteWorkspaceSecrets({ workspaceId: explicit }, admin.as))).toEqual({
      reason: Reason.PERMISSION_REQUIRED,
      message: 'Owner access required',
      field: '',
    });
    const stranger = await stack.agent('acme', 'Stranger');
    expect((await failure(stack.secrets.deleteWorkspaceSecrets({ workspaceId: explicit }, stranger.as))).reason).toBe(Reason.ACCESS_DENIED);

    // What the workspace service's DeleteWorkspace does once the workspace is gone.
    await stack.workspace.deleteWorkspace({ workspaceId: explicit }, owner.as);
    expect(await stack.secrets.deleteWorkspaceSecrets({ workspaceId: explicit }, owner.as)).toMatchObject({
      workspaceId: explicit,
      destroyed: true,
      secretsDeleted: 2,
    });
    expect(await keyRows(explicit)).toEqual({ keys: 0, secrets: 0 });
    expect(await stack.secrets.deleteWorkspaceSecrets({ workspaceId: explicit }, operator)).toMatchObject({ destroyed: false, secretsDeleted: 0 });

    // Without that call, the next secrets call on the deleted workspace destroys the key.
    await stack.workspace.deleteWorkspace({ workspaceId: lazy }, owner.as);
    expect(await keyRows(lazy)).toEqual({ keys: 1, secrets: 2 });
    expect(await failure(get(lazy, 'key-0'))).toEqual({ reason: Reason.NOT_FOUND, message: 'Workspace not found', field: '' });
    expect(await keyRows(lazy)).toEqual({ keys: 0, secrets: 0 });
  });

  test('a backup of a deleted workspace is unreadable once the KEK that wrapped its key is retired', async () => {
    const kekA = kekEntry(7);
    const kekB = kekEntry(8);
    // Keys made by the tests before are under the live KEKs.
    await useKeks(kekA, ...live);
    const all = await populate(2, 1);
    const [deleted, kept] = [...all.keys()] as [string, string];
    // The "backup": the rows as a dump would hold them.
    const backup = (await stack.db.query<{ kek_version: string; wrapped_key: Uint8Array }>(
      'SELECT kek_version, wrapped_key FROM workspace_keys WHERE workspace_id = $1',
      [deleted],
    )).rows[0]!;
    await stack.workspace.deleteWorkspace({ workspaceId: deleted }, owner.as);
    await stack.secrets.deleteWorkspaceSecrets({ workspaceId: deleted }, owner.as);
    await useKeks(kekB, ...live);
    expect(await stack.secrets.rotateKek({}, operator)).toMatchObject({ kekVersion: 'v8', failed: 0 });
    await useKeks(kekB);
    await expectReadable(new Map([[kept, all.get(kept)!]]));
    // With only the live KEKs, the backed-up wrapped key opens no more.
    const current = LocalKeyWrapper.parse(kekB);
    await expect(current.unwrap({ kekVersion: backup.kek_version, wrapped: Buffer.from(backup.wrapped_key) }, deleted)).rejects.toThrow(UnknownKekVersionError);
  });
});

checkLogsForLeaks(['KEK rotation finished', 'workspace data key rotated', 'destroyed the data key of a deleted workspace']);
