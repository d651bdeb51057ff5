import { authCacheKey, Reason, REVOKED_KEY_TOMBSTONE, sha256Hex } from '@agenthub/runtime';
import { backends, type Backend } from '@agenthub/testing';
import { asAgent, failure, newAgent, operator, startHarness, unique, type Harness } from './harness.js';

describe.each(backends().map((b) => [b.name, b] as const))('identity API keys (%s)', (_name, backend: Backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(async () => {
    await h?.close();
  });

  it('authenticates the first key without any principal', async () => {
    const agent = await newAgent(h, unique('t'));
    const { principal } = await h.client.authenticate({ apiKey: agent.apiKey });
    expect(principal).toMatchObject({ agentId: agent.id, tenantId: agent.tenantId });
  });

  it('shows a key once and stores only its hash', async () => {
    const agent = await newAgent(h, unique('t'));
    const issued = await h.client.createApiKey({ agentId: agent.id }, operator);
    expect(issued.apiKey).toMatch(/^ahk_[A-Za-z0-9_-]{43}$/);
    expect(issued.key).toMatchObject({ agentId: agent.id, prefix: issued.apiKey.slice(0, 12), revokedAt: 0n });

    const { keys } = await h.client.listApiKeys({ agentId: agent.id }, operator);
    expect(keys).toHaveLength(2);
    expect(keys.map((k) => k.id)).toContain(issued.key!.id);
    const listed = JSON.stringify(keys, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
    expect(listed).not.toContain(issued.apiKey);
    expect(listed).not.toContain(agent.apiKey);

    const { rows } = await h.db.query<Record<string, unknown>>('SELECT * FROM api_keys WHERE agent_id = $1', [agent.id]);
    expect(rows).toHaveLength(2);
    const stored = JSON.stringify(rows);
    expect(stored).not.toContain(issued.apiKey);
    expect(stored).not.toContain(agent.apiKey);
    expect(rows.map((r) => r.key_hash).sort()).toEqual([sha256Hex(agent.apiKey), sha256Hex(issued.apiKey)].sort());
  });

  it('keeps several keys active at once for rotation', async () => {
    const agent = await newAgent(h, unique('t'));
    const second = await h.client.createApiKey({ agentId: agent.id }, operator);
    for (const apiKey of [agent.apiKey, second.apiKey]) {
      expect((await h.client.authenticate({ apiKey })).principal!.agentId).toBe(agent.id);
    }
  });

  it('revokes a key at once, tombstones the cached lookup, and is idempotent', async () => {
    const agent = await newAgent(h, unique('t'));
    const spare = await h.client.createApiKey({ agentId: agent.id }, operator);
    const { keys } = await h.client.listApiKeys({ agentId: agent.id }, operator);
    const first = keys.find((k) => k.id !== spare.key!.id)!;
    // What a gateway would have cached after an earlier request with this key.
    const cacheKey = authCacheKey(sha256Hex(agent.apiKey));
    await h.kv.set(cacheKey, JSON.stringify({ agentId: agent.id, tenantId: agent.tenantId }));

    const { key } = await h.client.revokeApiKey({ keyId: first.id }, operator);
    expect(Number(key!.revokedAt)).toBeGreaterThan(0);
    expect(await h.kv.get(cacheKey)).toBe(REVOKED_KEY_TOMBSTONE);
    expect(await failure(h.client.authenticate({ apiKey: agent.apiKey }))).toMatchObject({ reason: Reason.UNAUTHENTICATED });
    expect((await h.client.authenticate({ apiKey: spare.apiKey })).principal!.agentId).toBe(agent.id);

    const again = await h.client.revokeApiKey({ keyId: first.id }, operator);
    expect(again.key).toEqual(key);
    const listed = (await h.client.listApiKeys({ agentId: agent.id }, operator)).keys.find((k) => k.id === first.id);
    expect(listed!.revokedAt).toBe(key!.revokedAt);
  });

  it('answers unknown, malformed and revoked keys alike', async () => {
    const agent = await newAgent(h, unique('t'));
    const { keys } = await h.client.listApiKeys({ agentId: agent.id }, operator);
    await h.client.revokeApiKey({ keyId: keys[0]!.id }, operator);
    const presented = [agent.apiKey, 'ahk_' + 'x'.repeat(43), 'not-a-key', '', 'ahk_' + 'y'.repeat(10_000)];
    const errors = await Promise.all(presented.map((apiKey) => failure(h.client.authenticate({ apiKey }))));
    for (const err of errors) {
      expect(err).toMatchObject({ reason: Reason.UNAUTHENTICATED, message: errors[0]!.message, field: '' });
    }
  });

  it('authenticates whatever principal the call carries', async () => {
    const agent = await newAgent(h, unique('t'));
    expect((await h.client.authenticate({ apiKey: agent.apiKey }, operator)).principal!.agentId).toBe(agent.id);
    const other = asAgent({ id: 'x', tenantId: 'y' });
    expect((await h.client.authenticate({ apiKey: agent.apiKey }, other)).principal!.agentId).toBe(agent.id);
  });

  it('reports unknown agents and keys, and malformed ids', async () => {
    expect(await failure(h.client.createApiKey({ agentId: 'ghost-agent' }, operator))).toMatchObject({
      reason: Reason.NOT_FOUND,
      message: 'Agent not found',
    });
    expect(await failure(h.client.listApiKeys({ agentId: 'ghost-agent' }, operator))).toMatchObject({
      reason: Reason.NOT_FOUND,
      message: 'Agent not found',
    });
    expect(await failure(h.client.revokeApiKey({ keyId: 'key_doesnotexist0000000' }, operator))).toMatchObject({
      reason: Reason.NOT_FOUND,
      message: 'API key not found',
    });
    for (const keyId of ['', 'KEY!']) {
      expect(await failure(h.client.revokeApiKey({ keyId }, operator))).toMatchObject({ reason: Reason.INVALID_PARAMS, field: 'key_id' });
    }
    expect(await failure(h.client.createApiKey({ agentId: '' }, operator))).toMatchObject({ reason: Reason.INVALID_PARAMS, field: 'agent_id' });
    expect(await failure(h.client.listApiKeys({ agentId: 'a b' }, operator))).toMatchObject({ reason: Reason.INVALID_PARAMS, field: 'agent_id' });
  });
});
