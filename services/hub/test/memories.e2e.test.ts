import pg from 'pg';
import { hubModes, startTestHub, type Agent, type RpcReply, type TestHub } from './harness.js';

/**
 * Memories end to end: real HTTP into the gateway, real gRPC to the workspace service, the
 * built-in embedding model (offline) and the embedded vector store, on embedded PGlite and on
 * real PostgreSQL + Redis. Role rules and codes are the interface specification's.
 */

const UNKNOWN_WS = 'ws_doesnotexist0000000';
const ACCESS_DENIED = { code: -32100, message: 'Access denied' };
const NOT_FOUND = { code: -32101, message: 'Workspace not found' };
const MEMORY_NOT_FOUND = { code: -32101, message: 'Memory not found' };
const WRITE_REQUIRED = { code: -32102, message: 'Write access required' };

describe.each(hubModes().map((m) => [m.name, m] as const))('memories over HTTP (%s)', (_name, backend) => {
  let hub: TestHub;
  let owner: Agent;
  let reader: Agent;
  let writer: Agent;
  let admin: Agent;
  let stranger: Agent;
  let other: Agent;

  beforeAll(async () => {
    // One embedding thread: the suite shares two cores with everything else.
    hub = await startTestHub(backend, { EMBEDDINGS_THREADS: '1' });
    owner = await hub.agent('acme', 'owner');
    reader = await hub.agent('acme', 'reader');
    writer = await hub.agent('acme', 'writer');
    admin = await hub.agent('acme', 'admin');
    stranger = await hub.agent('acme', 'stranger');
    other = await hub.agent('globex', 'other');
    // Loading the built-in model on a loaded 2-core machine has taken over 60 s.
  }, 180_000);
  afterAll(() => hub?.stop());

  const call = (who: Agent, method: string, params: unknown = {}): Promise<RpcReply> => hub.call(who.api_key, `x-hub/${method}`, params);
  const ok = (who: Agent, method: string, params: unknown = {}) => hub.ok(who.api_key, `x-hub/${method}`, params);

  async function expectError(reply: Promise<RpcReply>, expected: { code: number; message?: string }) {
    const { status, body } = await reply;
    expect(status).toBe(200);
    expect(body.result).toBeUndefined();
    expect(body.error).toMatchObject(expected);
    return body.error!;
  }

  async function expectInvalid(reply: Promise<RpcReply>, field: string) {
    const error = await expectError(reply, { code: -32602 });
    expect(error.data?.field).toBe(field);
    expect(error.message).toContain(field);
  }

  async function workspace(): Promise<string> {
    const { workspace } = await ok(owner, 'workspace.create', { name: 'Memories' });
    for (const [who, role] of [[reader, 'read'], [writer, 'write'], [admin, 'admin']] as const) {
      await ok(owner, 'workspace.members.add', { workspace_id: workspace.id, agent_id: who.agent_id, role });
    }
    return workspace.id;
  }

  test('acceptance: store "We chose Postgres for persistence." and find it first with "what database do we use"', async () => {
    const { workspace } = await ok(owner, 'workspace.create', { name: 'Fresh' });
    const stored = await ok(owner, 'workspace.store', { workspace_id: workspace.id, content: 'We chose Postgres for persistence.', type: 'decision', tags: ['database'] });
    expect(stored).toEqual({
      duplicate: false,
      updated: false,
      memory: {
        id: expect.stringMatching(/^wmem_[a-z0-9]{20}$/),
        workspace_id: workspace.id,
        content: 'We chose Postgres for persistence.',
        type: 'decision',
        tags: ['database'],
        created_at: expect.any(Number),
        created_by: owner.agent_id,
        updated_at: expect.any(Number),
        updated_by: owner.agent_id,
      },
    });
    const found = await ok(owner, 'workspace.query', { workspace_id: workspace.id, query: 'what database do we use' });
    expect(found.count).toBe(1);
    expect(found.memories[0]).toMatchObject({ id: stored.memory.id, content: 'We chose Postgres for persistence.', type: 'decision', tags: ['database'], created_at: stored.memory.created_at });
    expect(found.memories[0].score).toBeGreaterThan(0);
    expect(found.memories[0].score).toBeLessThanOrEqual(1);
  });

  test('every role may query and list; write and admin may store, update and forget; read may not', async () => {
    const ws = await workspace();
    for (const who of [owner, admin, writer]) {
      const { memory } = await ok(who, 'workspace.store', { workspace_id: ws, content: `Stored by a member ${who.agent_id}.` });
      expect((await ok(who, 'workspace.update', { workspace_id: ws, id: memory.id, tags: ['edited'] })).memory.tags).toEqual(['edited']);
      expect((await ok(who, 'workspace.forget', { workspace_id: ws, id: memory.id })).deleted_ids).toEqual([memory.id]);
    }
    const { memory } = await ok(owner, 'workspace.store', { workspace_id: ws, content: 'Readers can see this.' });
    for (const who of [owner, admin, writer, reader]) {
      expect((await ok(who, 'workspace.query', { workspace_id: ws, query: 'see' })).count).toBe(1);
      expect((await ok(who, 'workspace.memories', { workspace_id: ws })).total).toBe(1);
    }
    await expectError(call(reader, 'workspace.store', { workspace_id: ws, content: 'No.' }), WRITE_REQUIRED);
    await expectError(call(reader, 'workspace.update', { workspace_id: ws, id: memory.id, content: 'No.' }), WRITE_REQUIRED);
    await expectError(call(reader, 'workspace.forget', { workspace_id: ws, id: memory.id }), WRITE_REQUIRED);
    await expectError(call(reader, 'workspace.forget', { workspace_id: ws, query: 'see', dry_run: true }), WRITE_REQUIRED);
    // Non-members, of the same tenant (no implicit access) or another, are denied everything.
    for (const who of [stranger, other]) {
      await expectError(call(who, 'workspace.store', { workspace_id: ws, content: 'No.' }), ACCESS_DENIED);
      await expectError(call(who, 'workspace.query', { workspace_id: ws, query: 'see' }), ACCESS_DENIED);
      await expectError(call(who, 'workspace.memories', { workspace_id: ws }), ACCESS_DENIED);
      await expectError(call(who, 'workspace.update', { workspace_id: ws, id: memory.id, tags: [] }), ACCESS_DENIED);
      await expectError(call(who, 'workspace.forget', { workspace_id: ws, id: memory.id }), ACCESS_DENIED);
    }
    await expectError(call(owner, 'workspace.query', { workspace_id: UNKNOWN_WS, query: 'x' }), NOT_FOUND);
    await expectError(call(owner, 'workspace.store', { workspace_id: UNKNOWN_WS, content: 'x' }), NOT_FOUND);
    await expectError(call(owner, 'workspace.update', { workspace_id: ws, id: 'wmem_nosuchmemory', content: 'x' }), MEMORY_NOT_FOUND);
    await expectError(call(owner, 'workspace.forget', { workspace_id: ws, id: 'wmem_nosuchmemory' }), MEMORY_NOT_FOUND);
    // A removed member loses access at once.
    await ok(owner, 'workspace.members.remove', { workspace_id: ws, agent_id: reader.agent_id });
    await expectError(call(reader, 'workspace.query', { workspace_id: ws, query: 'see' }), ACCESS_DENIED);
  });

  test('bad parameters get -32602 naming the field', async () => {
    const ws = await workspace();
    await expectInvalid(call(owner, 'workspace.store', { workspace_id: ws }), 'content');
    await expectInvalid(call(owner, 'workspace.store', { workspace_id: ws, content: '   ' }), 'content');
    await expectInvalid(call(owner, 'workspace.store', { workspace_id: ws, content: 'x'.repeat(4001) }), 'content');
    await expectInvalid(call(owner, 'workspace.store', { workspace_id: ws, content: 'ok', type: 'opinion' }), 'type');
    await expectInvalid(call(owner, 'workspace.store', { workspace_id: ws, content: 'ok', tags: 'db' }), 'tags');
    await expectInvalid(call(owner, 'workspace.store', { workspace_id: ws, content: 'ok', tags: ['x'.repeat(65)] }), 'tags.0');
    await expectInvalid(call(owner, 'workspace.store', { workspace_id: ws, content: 'ok', tags: Array.from({ length: 21 }, (_, i) => `t${i}`) }), 'tags');
    await expectInvalid(call(owner, 'workspace.store', { content: 'ok' }), 'workspace_id');
    await expectInvalid(call(owner, 'workspace.query', { workspace_id: ws }), 'query');
    await expectInvalid(call(owner, 'workspace.query', { workspace_id: ws, query: 'x', limit: 0 }), 'limit');
    await expectInvalid(call(owner, 'workspace.query', { workspace_id: ws, query: 'x', limit: 101 }), 'limit');
    await expectInvalid(call(owner, 'workspace.query', { workspace_id: ws, query: 'x', limit: 2.5 }), 'limit');
    await expectInvalid(call(owner, 'workspace.query', { workspace_id: ws, query: 'x', threshold: 2 }), 'threshold');
    await expectInvalid(call(owner, 'workspace.query', { workspace_id: ws, query: 'x', threshold: '0.5' }), 'threshold');
    await expectInvalid(call(owner, 'workspace.query', { workspace_id: ws, query: 'x', type: ['fact', 'rumour'] }), 'type.1');
    await expectInvalid(call(owner, 'workspace.query', { workspace_id: ws, query: 'x', tag_match: 'some' }), 'tag_match');
    await expectInvalid(call(owner, 'workspace.query', { workspace_id: ws, query: 'x', created_after: -1 }), 'created_after');
    await expectInvalid(call(owner, 'workspace.update', { workspace_id: ws, content: 'x' }), 'id');
    await expectInvalid(call(owner, 'workspace.update', { workspace_id: ws, id: 'wmem_x' }), 'content');
    await expectInvalid(call(owner, 'workspace.forget', { workspace_id: ws }), 'id');
    await expectInvalid(call(owner, 'workspace.forget', { workspace_id: ws, id: 'wmem_x', query: 'x' }), 'id');
    await expectInvalid(call(owner, 'workspace.forget', { workspace_id: ws, query: 'x', dry_run: 'yes' }), 'dry_run');
    await expectInvalid(call(owner, 'workspace.memories', { workspace_id: ws, limit: 500 }), 'limit');
    await expectInvalid(call(owner, 'workspace.memories', { workspace_id: ws, offset: -5 }), 'offset');
    // Parameters are checked before the workspace is looked up.
    await expectInvalid(call(owner, 'workspace.store', { workspace_id: UNKNOWN_WS, content: '' }), 'content');
  });

  test('a duplicate store merges what the caller said: tags added, a given type replaces, reported as updated', async () => {
    const ws = await workspace();
    const first = (await ok(writer, 'workspace.store', { workspace_id: ws, content: 'Standups are at 9:30.', type: 'context', tags: ['team'] })).memory;
    const merged = await ok(admin, 'workspace.store', { workspace_id: ws, content: '  Standups are at 9:30. ', type: 'fact', tags: ['schedule', 'team'] });
    expect(merged).toEqual({
      duplicate: true,
      updated: true,
      memory: { ...first, type: 'fact', tags: ['team', 'schedule'], updated_at: expect.any(Number), updated_by: admin.agent_id },
    });
    const kept = await ok(writer, 'workspace.store', { workspace_id: ws, content: 'Standups are at 9:30.' });
    expect(kept).toEqual({ duplicate: true, updated: false, memory: merged.memory });
    const listed = await ok(reader, 'workspace.memories', { workspace_id: ws, type: 'fact', tags: ['schedule'] });
    expect(listed.memories.map((m: { id: string; type: string }) => [m.id, m.type])).toEqual([[first.id, 'fact']]);
  });

  test('store flags exact duplicates; query ranks, limits, thresholds and filters; update re-embeds', async () => {
    const ws = await workspace();
    const pg = (await ok(writer, 'workspace.store', { workspace_id: ws, content: 'We chose Postgres for persistence.', type: 'decision', tags: ['db', 'architecture'] })).memory;
    const twin = await ok(owner, 'workspace.store', { workspace_id: ws, content: 'We chose Postgres for persistence.', tags: ['db'] });
    expect(twin).toEqual({ duplicate: true, updated: false, memory: pg });
    const redis = (await ok(writer, 'workspace.store', { workspace_id: ws, content: 'Redis caches the session tokens.', tags: ['db'] })).memory;
    const lunch = (await ok(writer, 'workspace.store', { workspace_id: ws, content: 'Team lunch is on Fridays at noon.', type: 'context' })).memory;

    const all = await ok(reader, 'workspace.query', { workspace_id: ws, query: 'which database stores our data', limit: 3 });
    expect(all.count).toBe(3);
    expect(all.memories.map((m: { id: string }) => m.id)).toEqual([pg.id, redis.id, lunch.id]);
    const ids = async (params: Record<string, unknown>) =>
      (await ok(reader, 'workspace.query', { workspace_id: ws, query: 'database', ...params })).memories.map((m: { id: string }) => m.id).sort();
    expect(await ids({ type: 'decision' })).toEqual([pg.id]);
    expect(await ids({ type: ['fact', 'context'] })).toEqual([redis.id, lunch.id].sort());
    expect(await ids({ tags: ['db'] })).toEqual([pg.id, redis.id].sort());
    expect(await ids({ tags: ['db', 'architecture'], tag_match: 'all' })).toEqual([pg.id]);
    expect(await ids({ created_after: redis.created_at })).toEqual([redis.id, lunch.id].sort());
    expect(await ids({ threshold: 0.99 })).toEqual([]);

    const updated = await ok(writer, 'workspace.update', { workspace_id: ws, id: lunch.id, content: 'Team lunch moved to Thursdays.', tags: ['team'] });
    expect(updated).toMatchObject({ reembedded: true, memory: { id: lunch.id, content: 'Team lunch moved to Thursdays.', tags: ['team'], created_at: lunch.created_at } });
    expect(updated.memory.updated_at).toBeGreaterThanOrEqual(lunch.updated_at);
    const thursday = await ok(reader, 'workspace.query', { workspace_id: ws, query: 'lunch on Thursdays', limit: 1 });
    expect(thursday.memories[0]).toMatchObject({ id: lunch.id, content: 'Team lunch moved to Thursdays.' });
    await expectError(call(writer, 'workspace.update', { workspace_id: ws, id: redis.id, content: 'We chose Postgres for persistence.' }), { code: -32103 });
  });

  test('forget: by id; by query only what that query returns, with a dry run and conservative defaults', async () => {
    const ws = await workspace();
    const pg = (await ok(writer, 'workspace.store', { workspace_id: ws, content: 'We chose Postgres for persistence.', type: 'decision' })).memory;
    await ok(writer, 'workspace.store', { workspace_id: ws, content: 'Redis caches the session tokens.' });
    await ok(writer, 'workspace.store', { workspace_id: ws, content: 'Team lunch is on Fridays at noon.' });

    const vague = await ok(writer, 'workspace.forget', { workspace_id: ws, query: 'what database do we use' });
    expect(vague).toEqual({ dry_run: false, deleted: 0, deleted_ids: [], memories: [] });
    const dry = await ok(writer, 'workspace.forget', { workspace_id: ws, query: 'We chose Postgres for persistence', dry_run: true });
    expect(dry).toMatchObject({ dry_run: true, deleted: 0, deleted_ids: [], would_delete_ids: [pg.id] });
    expect(dry.memories[0].score).toBeGreaterThanOrEqual(0.6);
    expect((await ok(reader, 'workspace.memories', { workspace_id: ws })).total).toBe(3);

    const params = { workspace_id: ws, query: 'caches and databases', limit: 2, threshold: 0 };
    const expected = (await ok(reader, 'workspace.query', params)).memories.map((m: { id: string }) => m.id);
    const forgotten = await ok(writer, 'workspace.forget', params);
    expect(forgotten).toMatchObject({ dry_run: false, deleted: 2, deleted_ids: expected });
    const left = await ok(reader, 'workspace.memories', { workspace_id: ws });
    expect(left.total).toBe(1);
    expect(expected).not.toContain(left.memories[0].id);
    const last = left.memories[0].id;
    expect(await ok(writer, 'workspace.forget', { workspace_id: ws, id: last })).toMatchObject({ deleted: 1, deleted_ids: [last] });
    await expectError(call(writer, 'workspace.forget', { workspace_id: ws, id: last }), MEMORY_NOT_FOUND);
  });

  test('memories: pages oldest first with total, count and has_more; types lists the six types', async () => {
    const ws = await workspace();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await ok(writer, 'workspace.store', { workspace_id: ws, content: `Listed memory number ${i}`, type: i < 2 ? 'todo' : 'fact' })).memory.id);
    const first = await ok(reader, 'workspace.memories', { workspace_id: ws, limit: 3 });
    expect(first).toMatchObject({ count: 3, total: 5, limit: 3, offset: 0, has_more: true });
    const second = await ok(reader, 'workspace.memories', { workspace_id: ws, limit: 3, offset: 3 });
    expect(second).toMatchObject({ count: 2, total: 5, limit: 3, offset: 3, has_more: false });
    expect([...first.memories, ...second.memories].map((m: { id: string }) => m.id)).toEqual(ids);
    expect(first.memories[0]).not.toHaveProperty('score');
    const todos = await ok(reader, 'workspace.memories', { workspace_id: ws, type: 'todo' });
    expect(todos).toMatchObject({ total: 2, count: 2 });
    expect((await ok(stranger, 'workspace.types')).types).toEqual(['fact', 'decision', 'preference', 'todo', 'context', 'reference']);
  });

  test('memories.reembed (operator): nothing to move on a fresh hub; the model guard holds', async () => {
    const ws = await workspace();
    await ok(writer, 'workspace.store', { workspace_id: ws, content: 'Re-embedding has nothing to do here.' });
    expect(await hub.admin('memories.reembed', { workspace_id: ws })).toEqual({
      workspace_id: ws,
      model: 'use-lite-en-0.2.0',
      dimensions: 512,
      reembedded: 0,
      remaining: 0,
      dropped_models: [],
    });
    const wrong = await hub.call(hub.adminToken, 'memories.reembed', { workspace_id: ws, model: 'text-embedding-3-small' }, { path: '/admin' });
    expect(wrong.body.error).toMatchObject({ code: -32602, data: { field: 'model' } });
    // Agents have no such method.
    await expectError(call(owner, 'memories.reembed', { workspace_id: ws }), { code: -32601 });
  });

  test('deleting the workspace makes its memories unreachable', async () => {
    const ws = await workspace();
    await ok(writer, 'workspace.store', { workspace_id: ws, content: 'Gone with the workspace.' });
    await ok(owner, 'workspace.delete', { workspace_id: ws });
    await expectError(call(owner, 'workspace.query', { workspace_id: ws, query: 'gone' }), NOT_FOUND);
    await expectError(call(owner, 'workspace.memories', { workspace_id: ws }), NOT_FOUND);
  });

  const onPostgres = backend.name !== 'embedded' ? test : test.skip;
  const why = backend.name !== 'embedded' ? '' : ' (skipped: reads the tables directly, which PGlite keeps inside the hub)';
  onPostgres(`deleting the workspace deletes its memories and their vectors from the database${why}`, async () => {
    const ws = await workspace();
    const { memory } = await ok(writer, 'workspace.store', { workspace_id: ws, content: 'Erased with the workspace.' });
    const db = new pg.Client({ connectionString: hub.databaseUrl });
    await db.connect();
    try {
      const count = async (table: string, column: string, value: string) =>
        Number((await db.query(`SELECT count(*) AS n FROM workspace.${table} WHERE ${column} = $1`, [value])).rows[0].n);
      expect(await count('memories', 'id', memory.id)).toBe(1);
      expect(await count('memory_vectors', 'memory_id', memory.id)).toBe(1);
      await ok(owner, 'workspace.delete', { workspace_id: ws });
      expect(await count('memories', 'workspace_id', ws)).toBe(0);
      expect(await count('memory_vectors', 'workspace_id', ws)).toBe(0);
    } finally {
      await db.end();
    }
  });
});
