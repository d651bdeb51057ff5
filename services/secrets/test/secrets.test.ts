import { secretsv1, workspacev1 } from '@agenthub/proto';
import { createClient, OUTBOX_TABLE_SQL, Reason, WORKSPACE_EVENTS_TOPIC } from '@agenthub/runtime';
import { backends, type Backend } from '@agenthub/testing';
import { checkLogsForLeaks, secretValue } from './capture.js';
import { failure, operator, startStack, type SecretsClient, type Stack, type TestAgent } from './harness.js';

const { Role } = workspacev1;

const denied = { reason: Reason.ACCESS_DENIED, message: 'Access denied', field: '' };
const writeRequired = { reason: Reason.PERMISSION_REQUIRED, message: 'Write access required', field: '' };
const adminRequired = { reason: Reason.PERMISSION_REQUIRED, message: 'Admin access required', field: '' };
const workspaceNotFound = { reason: Reason.NOT_FOUND, message: 'Workspace not found', field: '' };
const secretNotFound = { reason: Reason.NOT_FOUND, message: 'Secret not found', field: '' };
const invalid = (field: string, problem: string) => ({ reason: Reason.INVALID_PARAMS, message: `Invalid params: ${field} ${problem}`, field });

const MAX_SECRETS = 5;

describe.each(backends().map((b) => [b.name, b] as const))('secrets (%s)', (_name, backend: Backend) => {
  let stack: Stack;
  let owner: TestAgent;
  let reader: TestAgent;
  let writer: TestAgent;
  let admin: TestAgent;
  let outsider: TestAgent;
  let partner: TestAgent;

  beforeAll(async () => {
    stack = await startStack(backend, { limits: { maxSecretsPerWorkspace: MAX_SECRETS } });
    owner = await stack.agent('acme', 'Owner');
    reader = await stack.agent('acme', 'Reader');
    writer = await stack.agent('acme', 'Writer');
    admin = await stack.agent('acme', 'Admin');
    outsider = await stack.agent('acme', 'Outsider');
    partner = await stack.agent('globex', 'Partner');
  });
  afterAll(async () => {
    await stack?.stop();
  });

  const staffed = () => stack.workspaceWith(owner, [[reader, Role.READ], [writer, Role.WRITE], [admin, Role.ADMIN]]);
  const get = (who: TestAgent, workspaceId: string, key: string) => stack.secrets.getSecret({ workspaceId, key }, who.as);
  const set = (who: TestAgent, workspaceId: string, key: string, value: string) => stack.secrets.setSecret({ workspaceId, key, value }, who.as);

  test('a value round-trips; setting it again replaces the value and keeps created_at', async () => {
    const workspaceId = await staffed();
    const before = Date.now();
    const first = secretValue('first');
    const created = await set(writer, workspaceId, 'API_TOKEN', first);
    expect(created.created).toBe(true);
    expect(created.secret?.key).toBe('API_TOKEN');
    expect(Number(created.secret?.createdAt)).toBeGreaterThanOrEqual(before);
    expect(created.secret?.updatedAt).toBe(created.secret?.createdAt);
    expect(await get(reader, workspaceId, 'API_TOKEN')).toMatchObject({ value: first, secret: created.secret });

    const second = secretValue('second');
    const replaced = await set(admin, workspaceId, 'API_TOKEN', second);
    expect(replaced.created).toBe(false);
    expect(replaced.secret?.createdAt).toBe(created.secret?.createdAt);
    expect(replaced.secret!.updatedAt).toBeGreaterThanOrEqual(created.secret!.updatedAt);
    expect((await get(owner, workspaceId, 'API_TOKEN')).value).toBe(second);
  });

  test('any UTF-8 text up to 64 KiB round-trips, the empty string too; larger is refused without echoing it', async () => {
    const workspaceId = await staffed();
    const unicode = `${secretValue('unicode')} — ключ 🔑 \u0000 "quoted" \\ \n`;
    const largest = secretValue('largest').padEnd(64 * 1024, 'x');
    for (const [key, value] of [['unicode', unicode], ['empty', ''], ['largest', largest]] as const) {
      await set(writer, workspaceId, key, value);
      expect((await get(reader, workspaceId, key)).value).toBe(value);
    }
    const tooLarge = `${secretValue('too-large')}`.padEnd(64 * 1024 + 1, 'y');
    const refused = await failure(set(writer, workspaceId, 'large', tooLarge));
    expect(refused).toEqual(invalid('value', 'must be at most 65536 bytes of UTF-8'));
    // Multi-byte characters count as their UTF-8 bytes.
    expect(await failure(set(writer, workspaceId, 'large', 'é'.repeat(32 * 1024 + 1)))).toEqual(refused);
    expect(await failure(get(reader, workspaceId, 'large'))).toEqual(secretNotFound);
  });

  test('keys: 1–128 of letters, digits and _ . - ; anything else is named before any look-up', async () => {
    const workspaceId = await staffed();
    for (const key of ['a', 'DB_PASSWORD', 'svc.prod-1', '_.-', 'k'.repeat(128)]) {
      await set(writer, workspaceId, key, secretValue('key'));
    }
    const unknownWs = 'ws_doesnotexist';
    for (const [key, problem] of [
      ['', 'is required'],
      ['k'.repeat(129), 'must be at most 128 characters'],
      ['has space', 'may hold only letters, digits, and _ . -'],
      ['a/b', 'may hold only letters, digits, and _ . -'],
      ['ключ', 'may hold only letters, digits, and _ . -'],
    ] as const) {
      for (const call of [
        set(writer, unknownWs, key, 'x'),
        get(writer, unknownWs, key),
        stack.secrets.deleteSecret({ workspaceId: unknownWs, key }, writer.as),
      ]) {
        expect(await failure(call)).toEqual(invalid('key', problem));
      }
    }
    for (const workspace of ['', 'nope', 'WS_UPPER']) {
      expect(await failure(stack.secrets.listSecrets({ workspaceId: workspace }, writer.as))).toEqual(
        invalid('workspace_id', 'must be a workspace id of the form ws_…'),
      );
    }
  });

  test('a workspace that does not exist is Workspace not found, for every call', async () => {
    const workspaceId = 'ws_doesnotexist';
    expect(await failure(set(writer, workspaceId, 'k', 'v'))).toEqual(workspaceNotFound);
    expect(await failure(get(writer, workspaceId, 'k'))).toEqual(workspaceNotFound);
    expect(await failure(stack.secrets.listSecrets({ workspaceId }, writer.as))).toEqual(workspaceNotFound);
    expect(await failure(stack.secrets.deleteSecret({ workspaceId, key: 'k' }, writer.as))).toEqual(workspaceNotFound);
  });

  test('list gives keys and timestamps ordered by key, never values', async () => {
    const workspaceId = await staffed();
    const values = new Map([['zeta', secretValue('z')], ['alpha', secretValue('a')], ['Mid', secretValue('m')]]);
    for (const [key, value] of values) await set(writer, workspaceId, key, value);
    const { secrets } = await stack.secrets.listSecrets({ workspaceId }, reader.as);
    expect(secrets.map((s) => s.key)).toEqual(['Mid', 'alpha', 'zeta']);
    for (const secret of secrets) expect(Number(secret.createdAt)).toBeGreaterThan(0);
    const wire = JSON.stringify(secrets, (_k, v) => (typeof v === 'bigint' ? String(v) : v));
    for (const value of values.values()) expect(wire).not.toContain(value);
    expect((await stack.secrets.listSecrets({ workspaceId: await staffed() }, reader.as)).secrets).toEqual([]);
  });

  test('delete removes the secret; a missing one is Secret not found', async () => {
    const workspaceId = await staffed();
    await set(writer, workspaceId, 'gone', secretValue());
    expect(await stack.secrets.deleteSecret({ workspaceId, key: 'gone' }, writer.as)).toMatchObject({ workspaceId, key: 'gone' });
    expect(await failure(get(reader, workspaceId, 'gone'))).toEqual(secretNotFound);
    expect(await failure(stack.secrets.deleteSecret({ workspaceId, key: 'gone' }, writer.as))).toEqual(secretNotFound);
    expect((await stack.secrets.listSecrets({ workspaceId }, reader.as)).secrets).toEqual([]);
  });

  test('the role matrix: read gets and lists, write also sets and deletes, admin also rotates; non-members get nothing', async () => {
    const workspaceId = await staffed();
    await set(owner, workspaceId, 'k', secretValue());
    const expectOk = async (call: Promise<unknown>) => expect(await call).toBeDefined();
    for (const who of [reader, writer, admin, owner]) {
      await expectOk(get(who, workspaceId, 'k'));
      await expectOk(stack.secrets.listSecrets({ workspaceId }, who.as));
    }
    expect(await failure(set(reader, workspaceId, 'k', 'x'))).toEqual(writeRequired);
    expect(await failure(stack.secrets.deleteSecret({ workspaceId, key: 'k' }, reader.as))).toEqual(writeRequired);
    // The role check comes before the secret's existence.
    expect(await failure(stack.secrets.deleteSecret({ workspaceId, key: 'missing' }, reader.as))).toEqual(writeRequired);
    for (const who of [writer, admin, owner]) {
      await expectOk(set(who, workspaceId, `by-${who.name}`, secretValue()));
      await expectOk(stack.secrets.deleteSecret({ workspaceId, key: `by-${who.name}` }, who.as));
    }
    for (const who of [reader, writer]) {
      expect(await failure(stack.secrets.rotateWorkspaceKey({ workspaceId }, who.as))).toEqual(adminRequired);
    }
    for (const who of [admin, owner]) await expectOk(stack.secrets.rotateWorkspaceKey({ workspaceId }, who.as));
    // Tenant trust alone and a grant alone give no access: only membership does.
    await stack.grant(partner, owner);
    for (const who of [outsider, partner]) {
      expect(await failure(get(who, workspaceId, 'k'))).toEqual(denied);
      expect(await failure(get(who, workspaceId, 'missing'))).toEqual(denied);
      expect(await failure(stack.secrets.listSecrets({ workspaceId }, who.as))).toEqual(denied);
      expect(await failure(set(who, workspaceId, 'k', 'x'))).toEqual(denied);
      expect(await failure(stack.secrets.deleteSecret({ workspaceId, key: 'k' }, who.as))).toEqual(denied);
      expect(await failure(stack.secrets.rotateWorkspaceKey({ workspaceId }, who.as))).toEqual(denied);
    }
  });

  test('secret calls need an agent principal', async () => {
    const workspaceId = await staffed();
    const unauthenticated = { reason: Reason.UNAUTHENTICATED, message: 'Missing or invalid API key', field: '' };
    expect(await failure(stack.secrets.getSecret({ workspaceId, key: 'k' }, operator))).toEqual(unauthenticated);
    expect(await failure(stack.secrets.setSecret({ workspaceId, key: 'k', value: 'v' }))).toEqual(unauthenticated);
    expect(await failure(stack.secrets.listSecrets({ workspaceId }))).toEqual(unauthenticated);
  });

  test('revoking the grant denies the very next call; so does removing the member', async () => {
    const guest = await stack.agent('initech', 'Guest');
    const grantId = await stack.grant(owner, guest);
    const workspaceId = await stack.workspaceWith(owner, [[guest, Role.WRITE], [writer, Role.WRITE]]);
    const value = secretValue('revocation');
    await set(guest, workspaceId, 'shared', value);
    expect((await get(guest, workspaceId, 'shared')).value).toBe(value);
    await stack.revoke(guest, grantId);
    expect(await failure(get(guest, workspaceId, 'shared'))).toEqual(denied);
    expect(await failure(set(guest, workspaceId, 'shared', 'x'))).toEqual(denied);

    expect((await get(writer, workspaceId, 'shared')).value).toBe(value);
    await stack.workspace.removeMember({ workspaceId, agentId: writer.id }, owner.as);
    expect(await failure(get(writer, workspaceId, 'shared'))).toEqual(denied);
    expect(await failure(stack.secrets.listSecrets({ workspaceId }, writer.as))).toEqual(denied);
    // Demoting takes effect at once too.
    await stack.workspace.addMember({ workspaceId, agentId: writer.id, role: Role.READ }, owner.as);
    expect(await failure(set(writer, workspaceId, 'shared', 'x'))).toEqual(writeRequired);
    expect((await get(writer, workspaceId, 'shared')).value).toBe(value);
  });

  test('a workspace holds a limited number of secrets; replacing one is always allowed', async () => {
    const workspaceId = await staffed();
    for (let i = 0; i < MAX_SECRETS; i += 1) await set(writer, workspaceId, `k${i}`, secretValue());
    expect(await failure(set(writer, workspaceId, 'one-too-many', 'x'))).toEqual({
      reason: Reason.QUOTA_EXCEEDED,
      message: `Quota exceeded: a workspace holds at most ${MAX_SECRETS} secrets; delete one first`,
      field: 'secrets_per_workspace',
    });
    await set(writer, workspaceId, 'k0', secretValue());
    expect((await stack.secrets.listSecrets({ workspaceId }, reader.as)).secrets).toHaveLength(MAX_SECRETS);
  });

  test('sets and deletes write workspace events to the outbox, never the value', async () => {
    const workspaceId = await staffed();
    const value = secretValue('event');
    await set(writer, workspaceId, 'evented', value);
    await set(admin, workspaceId, 'evented', secretValue('event'));
    await stack.secrets.deleteSecret({ workspaceId, key: 'evented' }, owner.as);
    const { rows } = await stack.db.query<{ topic: string; partition_key: string; type: string; payload: unknown }>(
      'SELECT topic, partition_key, type, payload FROM outbox WHERE partition_key = $1 ORDER BY seq',
      [workspaceId],
    );
    expect(rows.map((r) => [r.topic, r.partition_key, r.type])).toEqual([
      [WORKSPACE_EVENTS_TOPIC, workspaceId, 'workspace.secret.set'],
      [WORKSPACE_EVENTS_TOPIC, workspaceId, 'workspace.secret.set'],
      [WORKSPACE_EVENTS_TOPIC, workspaceId, 'workspace.secret.deleted'],
    ]);
    const payloads = rows.map((r) => (typeof r.payload === 'string' ? JSON.parse(r.payload) : r.payload));
    expect(payloads.map((p) => p.data)).toEqual([
      { workspace_id: workspaceId, key: 'evented', set_by: writer.id },
      { workspace_id: workspaceId, key: 'evented', set_by: admin.id },
      { workspace_id: workspaceId, key: 'evented', deleted_by: owner.id },
    ]);
    for (const payload of payloads) {
      expect(payload.event).toMatch(/^workspace\.secret\.(set|deleted)$/);
      expect(new Date(payload.timestamp).toISOString()).toBe(payload.timestamp);
    }
    expect(JSON.stringify(payloads)).not.toContain(value);
    // A refused call writes nothing.
    await failure(set(reader, workspaceId, 'evented', 'x'));
    const after = await stack.db.query('SELECT 1 FROM outbox WHERE partition_key = $1', [workspaceId]);
    expect(after.rows).toHaveLength(3);
  });

  test('the outbox table has the shape every service shares', async () => {
    const columns = async (schema: string) =>
      (
        await stack.db.query<{ column_name: string; data_type: string; is_nullable: string }>(
          `SELECT column_name, data_type, is_nullable FROM information_schema.columns
            WHERE table_schema = $1 AND table_name = 'outbox' ORDER BY ordinal_position`,
          [schema],
        )
      ).rows;
    await stack.db.transaction(async (tx) => {
      await tx.exec('CREATE SCHEMA IF NOT EXISTS outbox_shape; SET LOCAL search_path = outbox_shape;');
      await tx.exec(OUTBOX_TABLE_SQL);
    });
    expect(await columns('secrets')).toEqual(await columns('outbox_shape'));
    await stack.db.exec('DROP SCHEMA outbox_shape CASCADE');
  });

  test('the tables hold no plaintext and no unwrapped key; every write gets a fresh nonce', async () => {
    const workspaceId = await staffed();
    const value = secretValue('plaintext-check');
    await set(writer, workspaceId, 'same', value);
    const first = await stack.db.query<{ nonce: Uint8Array; ciphertext: Uint8Array }>(
      'SELECT nonce, ciphertext FROM secrets WHERE workspace_id = $1 AND key = $2',
      [workspaceId, 'same'],
    );
    await set(writer, workspaceId, 'same', value);
    const second = await stack.db.query<{ nonce: Uint8Array; ciphertext: Uint8Array }>(
      'SELECT nonce, ciphertext FROM secrets WHERE workspace_id = $1 AND key = $2',
      [workspaceId, 'same'],
    );
    expect(Buffer.from(second.rows[0]!.nonce)).toHaveLength(12);
    expect(Buffer.from(second.rows[0]!.nonce).equals(Buffer.from(first.rows[0]!.nonce))).toBe(false);
    expect(Buffer.from(second.rows[0]!.ciphertext).equals(Buffer.from(first.rows[0]!.ciphertext))).toBe(false);

    // Every column of every row, in every text form a reader of a dump might try.
    const dump: string[] = [];
    for (const table of ['secrets', 'workspace_keys', 'outbox']) {
      const { rows } = await stack.db.query<Record<string, unknown>>(`SELECT * FROM ${table}`);
      for (const row of rows) {
        for (const cell of Object.values(row)) {
          if (cell instanceof Uint8Array) {
            const bytes = Buffer.from(cell);
            dump.push(bytes.toString('utf8'), bytes.toString('latin1'), bytes.toString('hex'), bytes.toString('base64'));
          } else dump.push(JSON.stringify(cell));
        }
      }
    }
    const text = dump.join('\n');
    expect(text).not.toContain(value);
    expect(text).not.toContain(Buffer.from(value).toString('hex'));
    expect(text).not.toContain(Buffer.from(value).toString('base64'));
  });

  test('many clients setting and getting the same key at once always see a whole value', async () => {
    const workspaceId = await staffed();
    const clients: SecretsClient[] = Array.from({ length: 8 }, () =>
      createClient(secretsv1.SecretsService, stack.secretsAddress, { defaultTimeoutMs: 10_000, internalKey: stack.internalKey }),
    );
    try {
      const written = new Set<string>();
      const initial = secretValue('race');
      written.add(initial);
      await set(writer, workspaceId, 'contended', initial);
      const seen: string[] = [];
      await Promise.all(
        clients.map(async (client, c) => {
          for (let i = 0; i < 12; i += 1) {
            const who = c % 2 ? writer : admin;
            if (i % 3 === 0) {
              const value = secretValue(`race-${c}-${i}`);
              written.add(value);
              await client.setSecret({ workspaceId, key: 'contended', value }, who.as);
            } else {
              seen.push((await client.getSecret({ workspaceId, key: 'contended' }, reader.as)).value);
            }
          }
        }),
      );
      expect(seen.length).toBe(8 * 8);
      for (const value of seen) expect(written.has(value)).toBe(true);
      expect(written.has((await get(reader, workspaceId, 'contended')).value)).toBe(true);
      const { rows } = await stack.db.query('SELECT key FROM secrets WHERE workspace_id = $1', [workspaceId]);
      expect(rows).toHaveLength(1);
    } finally {
      for (const client of clients) client.close();
    }
  });

  test('the first sets of a new workspace, all at once, agree on one data key', async () => {
    const workspaceId = await staffed();
    const values = Array.from({ length: MAX_SECRETS }, (_, i) => [`first-${i}`, secretValue('first')] as const);
    await Promise.all(values.map(([key, value]) => set(writer, workspaceId, key, value)));
    for (const [key, value] of values) expect((await get(reader, workspaceId, key)).value).toBe(value);
    const keys = await stack.db.query('SELECT generation FROM workspace_keys WHERE workspace_id = $1', [workspaceId]);
    expect(keys.rows).toEqual([{ generation: 1 }]);
  });
});

checkLogsForLeaks(['"msg":"rpc refused"', '"reason":"INVALID_PARAMS"', '"reason":"QUOTA_EXCEEDED"']);
