import { workspacev1 } from '@agenthub/proto';
import { Reason } from '@agenthub/runtime';
import { backends, type Backend } from '@agenthub/testing';
import { UseLiteEmbedder, USE_LITE_MODEL_ID } from '../src/index.js';
import { failure, operator, type TestAgent } from './harness.js';
import { HashEmbedder, startMemoryStack, type MemoryStack } from './memories-stack.js';

const { Role, TagMatch } = workspacev1;

const invalid = (field: string, problem: string) => ({ reason: Reason.INVALID_PARAMS, message: `Invalid params: ${field} ${problem}`, field });
const denied = { reason: Reason.ACCESS_DENIED, message: 'Access denied', field: '' };
const writeRequired = { reason: Reason.PERMISSION_REQUIRED, message: 'Write access required', field: '' };
const notFound = (message = 'Workspace not found') => ({ reason: Reason.NOT_FOUND, message, field: '' });

// The real built-in model, loaded once for the whole file.
const embedder = new UseLiteEmbedder({ threads: 1 });
afterAll(() => embedder.close());

describe.each(backends().map((b) => [b.name, b] as const))('memories over gRPC (%s)', (_name, backend: Backend) => {
  let stack: MemoryStack;
  let owner: TestAgent;
  let reader: TestAgent;
  let writer: TestAgent;
  let stranger: TestAgent;

  beforeAll(async () => {
    stack = await startMemoryStack(backend, { embedder });
    owner = await stack.agent('acme', 'Owner');
    reader = await stack.agent('acme', 'Reader');
    writer = await stack.agent('acme', 'Writer');
    stranger = await stack.agent('acme', 'Stranger');
  }, 60_000);
  afterAll(() => stack?.stop());

  async function workspace(): Promise<string> {
    const { workspace } = await stack.workspace.createWorkspace({ name: 'Memories' }, owner.as);
    await stack.workspace.addMember({ workspaceId: workspace!.id, agentId: reader.id, role: Role.READ }, owner.as);
    await stack.workspace.addMember({ workspaceId: workspace!.id, agentId: writer.id, role: Role.WRITE }, owner.as);
    return workspace!.id;
  }
  const store = (workspaceId: string, content: string, extra: Partial<workspacev1.StoreMemoryRequest> = {}, as = owner.as) =>
    stack.workspace.storeMemory({ workspaceId, content, type: 'fact', tags: [], ...extra }, as);
  const events = async (workspaceId: string) =>
    (await stack.db.query<{ type: string; payload: any; partition_key: string }>(
      "SELECT type, payload, partition_key FROM outbox WHERE partition_key = $1 AND type LIKE 'workspace.memory.%' ORDER BY seq",
      [workspaceId],
    )).rows;

  test('the acceptance check: "what database do we use" finds the Postgres decision first', async () => {
    const ws = await workspace();
    const { memory } = await store(ws, 'We chose Postgres for persistence.', { type: 'decision' });
    await store(ws, 'Lunch is served at noon in the cafeteria.');
    await store(ws, 'Alice prefers tabs over spaces.', { type: 'preference' });
    const { memories, model } = await stack.workspace.queryMemories({ workspaceId: ws, query: 'what database do we use' }, reader.as);
    expect(model).toBe(USE_LITE_MODEL_ID);
    expect(memories[0]).toMatchObject({ id: memory!.id, content: 'We chose Postgres for persistence.', type: 'decision' });
    expect(memories).toHaveLength(3);
    const scores = memories.map((m) => m.score);
    expect([...scores].sort((a, b) => b - a)).toEqual(scores);
    for (const score of scores) expect(score >= 0 && score <= 1).toBe(true);
  });

  test('StoreMemory returns the memory, defaults the type, cleans tags, and announces it in the outbox', async () => {
    const ws = await workspace();
    const before = Date.now();
    const { memory, duplicate } = await store(ws, '  The API speaks JSON-RPC.  ', { type: '', tags: [' api ', 'api', 'protocol'] }, writer.as);
    expect(duplicate).toBe(false);
    expect(memory!.id).toMatch(/^wmem_[a-z0-9]{20}$/);
    expect(memory).toMatchObject({ workspaceId: ws, content: 'The API speaks JSON-RPC.', type: 'fact', tags: ['api', 'protocol'], createdBy: writer.id, updatedBy: writer.id });
    expect(Number(memory!.createdAt)).toBeGreaterThanOrEqual(before);
    expect(memory!.updatedAt).toBe(memory!.createdAt);
    const [event] = await events(ws);
    expect(event!.type).toBe('workspace.memory.stored');
    expect(event!.payload).toEqual({
      event: 'workspace.memory.stored',
      timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      data: { workspace_id: ws, memory_id: memory!.id, type: 'fact', stored_by: writer.id },
    });
  });

  test('storing the same content again keeps one memory and merges what the caller said: tags added, a given type replaces, an event when it changed', async () => {
    const ws = await workspace();
    const first = await store(ws, 'Deploys happen on Tuesdays.', { type: 'context', tags: ['ops'] });
    // Nothing new (no type given, a tag it has): the memory as it was, no event.
    const same = await store(ws, 'Deploys happen on Tuesdays.  ', { type: '', tags: ['ops'] }, writer.as);
    expect([same.duplicate, same.updated]).toEqual([true, false]);
    expect(same.memory).toEqual(first.memory);
    // Another type and a new tag: merged into the memory, reported, announced.
    const merged = await store(ws, 'Deploys happen on Tuesdays.', { type: 'fact', tags: ['release', 'ops'] }, writer.as);
    expect([merged.duplicate, merged.updated]).toEqual([true, true]);
    expect(merged.memory).toMatchObject({ id: first.memory!.id, type: 'fact', tags: ['ops', 'release'], createdBy: owner.id, updatedBy: writer.id });
    // No type given keeps the memory's; its tags are added.
    const tagged = await store(ws, 'Deploys happen on Tuesdays.', { type: '', tags: ['weekly'] });
    expect(tagged.memory).toMatchObject({ id: first.memory!.id, type: 'fact', tags: ['ops', 'release', 'weekly'], updatedBy: owner.id });
    // Search sees the merged memory: its new type and tags, embedded again for the type.
    const found = await stack.workspace.queryMemories({ workspaceId: ws, query: 'when do we deploy', filter: { types: ['fact'], tags: ['release'] } }, reader.as);
    expect(found.memories.map((m) => [m.id, m.type, m.tags])).toEqual([[first.memory!.id, 'fact', ['ops', 'release', 'weekly']]]);
    // A merge past the tag limit is refused rather than dropping tags.
    const many = Array.from({ length: 18 }, (_, i) => `t${i}`);
    expect(await failure(store(ws, 'Deploys happen on Tuesdays.', { type: '', tags: many }))).toMatchObject({ reason: Reason.INVALID_PARAMS, field: 'tags' });
    expect((await store(ws, 'Deploys happen on Tuesdays.', { type: '' })).memory!.tags).toEqual(['ops', 'release', 'weekly']);

    const races = await Promise.all([1, 2, 3].map(() => store(ws, 'Concurrent twins are one memory.')));
    expect(new Set(races.map((r) => r.memory!.id)).size).toBe(1);
    expect(races.filter((r) => !r.duplicate)).toHaveLength(1);
    expect(races.filter((r) => r.updated)).toHaveLength(0);
    const { total } = await stack.workspace.listMemories({ workspaceId: ws }, owner.as);
    expect(total).toBe(2);
    const announced = await events(ws);
    expect(announced.map((e) => e.type)).toEqual(['workspace.memory.stored', 'workspace.memory.updated', 'workspace.memory.updated', 'workspace.memory.stored']);
    expect(announced[1]!.payload.data).toEqual({ workspace_id: ws, memory_id: first.memory!.id, type: 'fact', updated_by: writer.id });
  });

  test('QueryMemories applies limit, threshold and the type, tag and time filters', async () => {
    const ws = await workspace();
    const a = (await store(ws, 'We chose Postgres for persistence.', { type: 'decision', tags: ['db', 'architecture'] })).memory!;
    const b = (await store(ws, 'Redis caches session tokens.', { type: 'fact', tags: ['db'] })).memory!;
    const c = (await store(ws, 'Migrate the database to version 16.', { type: 'todo', tags: ['ops'] })).memory!;
    const ids = async (extra: Partial<Parameters<MemoryStack['workspace']['queryMemories']>[0]>) =>
      (await stack.workspace.queryMemories({ workspaceId: ws, query: 'database', ...extra }, reader.as)).memories.map((m) => m.id).sort();
    expect(await ids({ limit: 1 })).toHaveLength(1);
    expect(await ids({ threshold: 0.99 })).toEqual([]);
    expect(await ids({ filter: { types: ['decision', 'todo'] } })).toEqual([a.id, c.id].sort());
    expect(await ids({ filter: { tags: ['db', 'ops'] } })).toEqual([a.id, b.id, c.id].sort());
    expect(await ids({ filter: { tags: ['db', 'architecture'], tagMatch: TagMatch.ALL } })).toEqual([a.id]);
    expect(await ids({ filter: { createdAfter: b.createdAt } })).toEqual([b.id, c.id].sort());
    expect(await ids({ filter: { createdBefore: b.createdAt } })).toEqual([a.id]);
  });

  test('UpdateMemory re-embeds new content, replaces tags without re-embedding, and announces it', async () => {
    const ws = await workspace();
    const { memory } = await store(ws, 'The office is in Berlin.', { type: 'context', tags: ['office'] });
    const embedded = embedder.stats.texts;
    const tagged = await stack.workspace.updateMemory({ workspaceId: ws, id: memory!.id, tags: { tags: ['hq'] } }, writer.as);
    expect(embedder.stats.texts).toBe(embedded);
    expect(tagged).toMatchObject({ reembedded: false, memory: { content: 'The office is in Berlin.', tags: ['hq'], updatedBy: writer.id, createdBy: owner.id } });
    const moved = await stack.workspace.updateMemory({ workspaceId: ws, id: memory!.id, content: 'The office moved to Lisbon, Portugal.' }, writer.as);
    expect(moved).toMatchObject({ reembedded: true, memory: { content: 'The office moved to Lisbon, Portugal.', tags: ['hq'], type: 'context' } });
    expect(Number(moved.memory!.updatedAt)).toBeGreaterThanOrEqual(Number(memory!.createdAt));
    const found = await stack.workspace.queryMemories({ workspaceId: ws, query: 'Lisbon Portugal', filter: { tags: ['hq'] } }, reader.as);
    expect(found.memories.map((m) => m.id)).toEqual([memory!.id]);
    expect(found.memories[0]!.score).toBeGreaterThan(0.5);
    const updates = (await events(ws)).filter((e) => e.type === 'workspace.memory.updated');
    expect(updates.map((e) => e.payload.data)).toEqual([
      { workspace_id: ws, memory_id: memory!.id, type: 'context', updated_by: writer.id },
      { workspace_id: ws, memory_id: memory!.id, type: 'context', updated_by: writer.id },
    ]);

    const other = (await store(ws, 'Another fact.')).memory!;
    expect(await failure(stack.workspace.updateMemory({ workspaceId: ws, id: other.id, content: 'The office moved to Lisbon, Portugal.' }, owner.as))).toEqual({
      reason: Reason.INVALID_OPERATION,
      message: `Another memory of this workspace has this content: ${memory!.id}`,
      field: '',
    });
    expect(await failure(stack.workspace.updateMemory({ workspaceId: ws, id: other.id }, owner.as))).toEqual(invalid('content', 'or tags is required'));
    expect(await failure(stack.workspace.updateMemory({ workspaceId: ws, id: 'wmem_missing', content: 'x' }, owner.as))).toEqual(notFound('Memory not found'));
  });

  test('ForgetMemories by id deletes one memory and its vector, and announces it', async () => {
    const ws = await workspace();
    const { memory } = await store(ws, 'Forget me by id.', { type: 'todo' });
    const dry = await stack.workspace.forgetMemories({ workspaceId: ws, id: memory!.id, dryRun: true }, writer.as);
    expect(dry.dryRun).toBe(true);
    expect(dry.memories.map((m) => m.id)).toEqual([memory!.id]);
    const gone = await stack.workspace.forgetMemories({ workspaceId: ws, id: memory!.id }, writer.as);
    expect(gone.memories.map((m) => m.id)).toEqual([memory!.id]);
    expect((await stack.workspace.queryMemories({ workspaceId: ws, query: 'Forget me by id.' }, owner.as)).memories).toEqual([]);
    expect(await failure(stack.workspace.forgetMemories({ workspaceId: ws, id: memory!.id }, writer.as))).toEqual(notFound('Memory not found'));
    const deleted = (await events(ws)).filter((e) => e.type === 'workspace.memory.deleted');
    expect(deleted.map((e) => e.payload.data)).toEqual([{ workspace_id: ws, memory_id: memory!.id, type: 'todo', deleted_by: writer.id }]);
  });

  test('ForgetMemories by query deletes exactly what the same query returns, conservatively by default', async () => {
    const ws = await workspace();
    const postgres = (await store(ws, 'We chose Postgres for persistence.', { type: 'decision' })).memory!;
    await store(ws, 'Redis caches session tokens.');
    await store(ws, 'The team lunch is on Fridays.');
    // Default: the single best match, and only if it scores at least 0.6.
    expect((await stack.workspace.forgetMemories({ workspaceId: ws, query: 'what database do we use' }, writer.as)).memories).toEqual([]);
    const close = await stack.workspace.forgetMemories({ workspaceId: ws, query: 'We chose Postgres for persistence', dryRun: true }, writer.as);
    expect(close.memories.map((m) => m.id)).toEqual([postgres.id]);
    expect((await stack.workspace.listMemories({ workspaceId: ws }, owner.as)).total).toBe(3);

    const query = { workspaceId: ws, query: 'caching and databases', limit: 2, threshold: 0 };
    const expected = (await stack.workspace.queryMemories(query, owner.as)).memories.map((m) => m.id);
    const forgotten = await stack.workspace.forgetMemories(query, writer.as);
    expect(forgotten.dryRun).toBe(false);
    expect(forgotten.memories.map((m) => m.id)).toEqual(expected);
    expect((await stack.workspace.listMemories({ workspaceId: ws }, owner.as)).total).toBe(1);

    expect(await failure(stack.workspace.forgetMemories({ workspaceId: ws }, writer.as))).toEqual(invalid('id', 'or query is required'));
    expect(await failure(stack.workspace.forgetMemories({ workspaceId: ws, id: postgres.id, query: 'x' }, writer.as))).toEqual(invalid('id', 'and query cannot both be given'));
    expect(await failure(stack.workspace.forgetMemories({ workspaceId: ws, query: 'x', limit: 101 }, writer.as))).toEqual(invalid('limit', 'must be an integer from 1 to 100'));
  });

  test('ListMemories pages oldest first with a total, and filters', async () => {
    const ws = await workspace();
    const stored = [];
    for (let i = 0; i < 5; i++) stored.push((await store(ws, `Listed memory ${i}`, { type: i % 2 ? 'todo' : 'fact', tags: [`t${i % 3}`] })).memory!);
    const page1 = await stack.workspace.listMemories({ workspaceId: ws, limit: 2 }, reader.as);
    const page2 = await stack.workspace.listMemories({ workspaceId: ws, limit: 2, offset: 2 }, reader.as);
    const page3 = await stack.workspace.listMemories({ workspaceId: ws, limit: 2, offset: 4 }, reader.as);
    expect([...page1.memories, ...page2.memories, ...page3.memories].map((m) => m.id)).toEqual(stored.map((m) => m.id));
    expect(page1).toMatchObject({ total: 5, limit: 2, offset: 0 });
    expect((await stack.workspace.listMemories({ workspaceId: ws }, reader.as)).limit).toBe(50);
    const todos = await stack.workspace.listMemories({ workspaceId: ws, filter: { types: ['todo'] } }, reader.as);
    expect(todos.memories.map((m) => m.content)).toEqual(['Listed memory 1', 'Listed memory 3']);
    expect(todos.total).toBe(2);
    expect((await stack.workspace.listMemories({ workspaceId: ws, filter: { tags: ['t0', 't1'] } }, reader.as)).total).toBe(4);
    expect(await failure(stack.workspace.listMemories({ workspaceId: ws, limit: 201 }, reader.as))).toEqual(invalid('limit', 'must be an integer from 1 to 200'));
    expect(await failure(stack.workspace.listMemories({ workspaceId: ws, offset: -1 }, reader.as))).toEqual(invalid('offset', 'must be an integer from 0 to 1000000'));
  });

  test('roles: read may query and list; store, update and forget need write; non-members are denied', async () => {
    const ws = await workspace();
    const { memory } = await store(ws, 'A memory for role checks.');
    expect((await stack.workspace.queryMemories({ workspaceId: ws, query: 'role' }, reader.as)).memories.map((m) => m.id)).toEqual([memory!.id]);
    expect((await stack.workspace.listMemories({ workspaceId: ws }, reader.as)).memories.map((m) => m.id)).toEqual([memory!.id]);
    expect(await failure(store(ws, 'Readers cannot store.', {}, reader.as))).toEqual(writeRequired);
    expect(await failure(stack.workspace.updateMemory({ workspaceId: ws, id: memory!.id, content: 'x' }, reader.as))).toEqual(writeRequired);
    expect(await failure(stack.workspace.forgetMemories({ workspaceId: ws, id: memory!.id }, reader.as))).toEqual(writeRequired);
    for (const call of [
      store(ws, 'Strangers cannot store.', {}, stranger.as),
      stack.workspace.queryMemories({ workspaceId: ws, query: 'x' }, stranger.as),
      stack.workspace.listMemories({ workspaceId: ws }, stranger.as),
      stack.workspace.updateMemory({ workspaceId: ws, id: memory!.id, content: 'x' }, stranger.as),
      stack.workspace.forgetMemories({ workspaceId: ws, id: memory!.id }, stranger.as),
    ]) {
      expect(await failure(call)).toEqual(denied);
    }
    expect(await failure(stack.workspace.queryMemories({ workspaceId: 'ws_nosuchworkspace', query: 'x' }, owner.as))).toEqual(notFound());
    // Parameters are checked before the workspace is looked up.
    expect(await failure(store('ws_nosuchworkspace', ''))).toEqual(invalid('content', 'is required'));
    expect(await failure(store(ws, 'x'.repeat(4001)))).toEqual(invalid('content', 'must be at most 4000 characters'));
    expect(await failure(store(ws, 'ok', { type: 'opinion' }))).toEqual(invalid('type', 'must be one of fact, decision, preference, todo, context, reference'));
    expect(await failure(store(ws, 'ok', { tags: Array.from({ length: 21 }, (_, i) => `t${i}`) }))).toEqual(invalid('tags', 'must have at most 20 items'));
    expect(await failure(store(ws, 'ok', { tags: ['fine', ' '] }))).toEqual(invalid('tags.1', 'must not be empty'));
    expect(await failure(stack.workspace.queryMemories({ workspaceId: ws, query: 'x', threshold: 1.5 }, owner.as))).toEqual(invalid('threshold', 'must be a number from 0 to 1'));
    expect(await failure(stack.workspace.queryMemories({ workspaceId: ws, query: '  ' }, owner.as))).toEqual(invalid('query', 'is required'));
    expect(await failure(stack.workspace.updateMemory({ workspaceId: ws, id: 'mem_1', content: 'x' }, owner.as))).toEqual(invalid('id', 'must be a memory id of the form wmem_…'));
  });

  test('deleting a workspace deletes its memories and their vectors', async () => {
    const ws = await workspace();
    await store(ws, 'This goes with the workspace.');
    const count = async (table: string) => Number((await stack.db.query<{ n: string }>(`SELECT count(*) AS n FROM ${table} WHERE workspace_id = $1`, [ws])).rows[0]!.n);
    expect(await count('memory_vectors')).toBe(1);
    await stack.workspace.deleteWorkspace({ workspaceId: ws }, owner.as);
    expect(await count('memories')).toBe(0);
    expect(await count('memory_vectors')).toBe(0);
  });

  test('ReembedWorkspace (operator) moves a workspace to another model without mixing models', async () => {
    const ws = await workspace();
    const { memory } = await store(ws, 'We chose Postgres for persistence.', { type: 'decision' });
    expect(await failure(stack.workspace.reembedWorkspace({ workspaceId: ws }, owner.as))).toEqual({ reason: Reason.PERMISSION_REQUIRED, message: 'Operator access required', field: '' });
    const hash = new HashEmbedder();
    const next = await stack.restartWith(hash);
    // Until the re-embed, the new model's searches see none of the old model's memories.
    expect((await next.queryMemories({ workspaceId: ws, query: 'postgres persistence' }, owner.as)).memories).toEqual([]);
    expect(await failure(next.reembedWorkspace({ workspaceId: ws, model: 'some-other-model' }, operator))).toEqual(invalid('model', 'must be the configured embedding model (test-hash-64)'));
    expect(await failure(next.reembedWorkspace({ workspaceId: 'ws_nosuchworkspace' }, operator))).toEqual(notFound());
    const result = await next.reembedWorkspace({ workspaceId: ws, model: 'test-hash-64' }, operator);
    expect(result).toMatchObject({ workspaceId: ws, model: 'test-hash-64', dimensions: 64, reembedded: 1, remaining: 0, droppedModels: [USE_LITE_MODEL_ID] });
    const found = await next.queryMemories({ workspaceId: ws, query: 'postgres persistence' }, owner.as);
    expect(found.memories.map((m) => m.id)).toEqual([memory!.id]);
    expect(found.model).toBe('test-hash-64');
    // The old model's vectors are gone, and a second run has nothing to do.
    expect((await stack.workspace.queryMemories({ workspaceId: ws, query: 'what database do we use' }, owner.as)).memories).toEqual([]);
    expect(await next.reembedWorkspace({ workspaceId: ws }, operator)).toMatchObject({ reembedded: 0, remaining: 0, droppedModels: [] });
  });
});
