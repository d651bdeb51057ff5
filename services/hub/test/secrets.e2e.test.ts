import pg from 'pg';
import { burstUntilGrouped, hubModes, withInproc, startTestHub, type Agent, type RpcReply, type TestHub } from './harness.js';
import type { SplitStack } from './split-hub.js';

/**
 * Workspace secrets end to end: real HTTP into the gateway, gRPC to the secrets service, which
 * asks the workspace service for the caller's role on every call; on embedded PGlite and on real
 * PostgreSQL + Redis. Codes and messages are the interface specification's (Errors).
 */

const UNKNOWN_WS = 'ws_doesnotexist0000000';

describe.each(withInproc(hubModes()).map((m) => [m.name, m] as const))('secrets over HTTP (%s)', (_name, backend) => {
  let hub: TestHub;
  let owner: Agent;
  let reader: Agent;
  let writer: Agent;
  let admin: Agent;
  let outsider: Agent;

  beforeAll(async () => {
    hub = await startTestHub(backend);
    owner = await hub.agent('acme', 'owner');
    reader = await hub.agent('acme', 'reader');
    writer = await hub.agent('acme', 'writer');
    admin = await hub.agent('acme', 'admin');
    outsider = await hub.agent('acme', 'outsider');
  });
  afterAll(() => hub?.stop());

  const call = (who: Agent, method: string, params: unknown = {}): Promise<RpcReply> => hub.call(who.api_key, `x-hub/${method}`, params);
  const ok = (who: Agent, method: string, params: unknown = {}) => hub.ok(who.api_key, `x-hub/${method}`, params);

  async function expectError(reply: Promise<RpcReply> | RpcReply, code: number, message?: string) {
    const { status, body } = await reply;
    expect(body.result).toBeUndefined();
    expect(body.error).toMatchObject({ code, ...(message !== undefined ? { message } : {}) });
    expect(status).toBe(200);
    return body.error!;
  }

  async function expectInvalid(reply: Promise<RpcReply>, field: string) {
    const error = await expectError(reply, -32602);
    expect(error.data?.field).toBe(field);
    expect(error.message).toContain(field);
    return error;
  }

  function expectRecent(timestamp: unknown) {
    expect(Number.isInteger(timestamp)).toBe(true);
    expect(Math.abs((timestamp as number) - Date.now())).toBeLessThan(60_000);
  }

  let seq = 0;
  const unique = (label: string) => `${label}-${++seq}-${Math.random().toString(36).slice(2)}`;

  /** A workspace of the owner's with reader, writer and admin members. */
  async function staffed(): Promise<string> {
    const { workspace } = await ok(owner, 'workspace.create', { name: 'Secrets' });
    for (const [member, role] of [[reader, 'read'], [writer, 'write'], [admin, 'admin']] as const) {
      await ok(owner, 'workspace.members.add', { workspace_id: workspace.id, agent_id: member.agent_id, role });
    }
    return workspace.id;
  }

  it('answers concurrent gets that share round trips (GetSecrets, ResolveAccesses) each for its own caller, and a removed member fails on the very next one', async () => {
    const workspaceId = await staffed();
    const value = unique('value');
    await ok(writer, 'workspace.secrets.set', { workspace_id: workspaceId, key: 'SHARED', value });
    const callers = [reader, admin, outsider];
    const burst = () => Promise.all(Array.from({ length: 48 }, (_, i) => call(callers[i % 3]!, 'workspace.secrets.get', { workspace_id: workspaceId, key: 'SHARED' })));
    const expectBurst = (replies: RpcReply[], readerAllowed: boolean) =>
      replies.forEach((reply, i) => {
        if (i % 3 === 1 || (i % 3 === 0 && readerAllowed)) expect(reply.body.result).toMatchObject({ key: 'SHARED', value });
        else expect(reply.body.error).toMatchObject({ code: -32100, message: 'Access denied' });
      });

    const groups = await burstUntilGrouped(hub, 'GetSecrets', async () => expectBurst(await burst(), true));
    // The secrets service asks the workspace service for each caller's access the same way (its
    // metrics are its own process's in split mode).
    const secretsMetrics = (hub as Partial<SplitStack>).processes?.secrets.opsUrl ?? hub.metricsUrl;
    const resolves = await burstUntilGrouped(hub, 'ResolveAccesses', async () => expectBurst(await burst(), true), secretsMetrics);
    // In-process calls (HUB_TRANSPORT=inproc) have no round trips to share.
    if (_name !== 'inproc') {
      expect(groups.after).toBeGreaterThan(groups.before);
      expect(resolves.after).toBeGreaterThan(resolves.before);
    }

    await ok(owner, 'workspace.members.remove', { workspace_id: workspaceId, agent_id: reader.agent_id });
    expectBurst(await burst(), false);
  });

  it('set, get, list and delete, with the documented result shapes', async () => {
    const workspaceId = await staffed();
    const value = unique('value');
    const created = await ok(writer, 'workspace.secrets.set', { workspace_id: workspaceId, key: 'DB_PASSWORD', value });
    expect(created).toEqual({ key: 'DB_PASSWORD', created: true, created_at: expect.any(Number), updated_at: created.created_at });
    expectRecent(created.created_at);

    expect(await ok(reader, 'workspace.secrets.get', { workspace_id: workspaceId, key: 'DB_PASSWORD' })).toEqual({
      key: 'DB_PASSWORD',
      value,
      created_at: created.created_at,
      updated_at: created.updated_at,
    });

    const next = unique('value');
    const replaced = await ok(admin, 'workspace.secrets.set', { workspace_id: workspaceId, key: 'DB_PASSWORD', value: next });
    expect(replaced).toMatchObject({ key: 'DB_PASSWORD', created: false, created_at: created.created_at });
    expect(replaced.updated_at).toBeGreaterThanOrEqual(created.updated_at);
    expect((await ok(owner, 'workspace.secrets.get', { workspace_id: workspaceId, key: 'DB_PASSWORD' })).value).toBe(next);

    const other = unique('value');
    await ok(writer, 'workspace.secrets.set', { workspace_id: workspaceId, key: 'API.key-1', value: other });
    const listed = await ok(reader, 'workspace.secrets.list', { workspace_id: workspaceId });
    expect(listed).toEqual({
      keys: [
        { key: 'API.key-1', created_at: expect.any(Number), updated_at: expect.any(Number) },
        { key: 'DB_PASSWORD', created_at: created.created_at, updated_at: replaced.updated_at },
      ],
      count: 2,
    });
    const raw = JSON.stringify(listed);
    for (const v of [value, next, other]) expect(raw).not.toContain(v);

    expect(await ok(writer, 'workspace.secrets.delete', { workspace_id: workspaceId, key: 'DB_PASSWORD' })).toEqual({
      deleted: true,
      workspace_id: workspaceId,
      key: 'DB_PASSWORD',
    });
    await expectError(call(reader, 'workspace.secrets.get', { workspace_id: workspaceId, key: 'DB_PASSWORD' }), -32101, 'Secret not found');
    expect((await ok(reader, 'workspace.secrets.list', { workspace_id: workspaceId })).count).toBe(1);
  });

  it('-32602 names the field: key syntax and length, value size and type, missing parameters', async () => {
    const workspaceId = await staffed();
    const tooLarge = unique('large').padEnd(64 * 1024 + 1, 'z');
    for (const params of [
      { workspace_id: workspaceId, value: 'v' },
      { workspace_id: workspaceId, key: '', value: 'v' },
      { workspace_id: workspaceId, key: 'has space', value: 'v' },
      { workspace_id: workspaceId, key: 'k'.repeat(129), value: 'v' },
      { workspace_id: workspaceId, key: 7, value: 'v' },
    ]) {
      await expectInvalid(call(writer, 'workspace.secrets.set', params), 'key');
    }
    const error = await expectInvalid(call(writer, 'workspace.secrets.set', { workspace_id: workspaceId, key: 'k', value: tooLarge }), 'value');
    expect(error.message).toBe('Invalid params: value must be at most 65536 bytes of UTF-8');
    await expectInvalid(call(writer, 'workspace.secrets.set', { workspace_id: workspaceId, key: 'k' }), 'value');
    await expectInvalid(call(writer, 'workspace.secrets.set', { workspace_id: workspaceId, key: 'k', value: { nested: true } }), 'value');
    await expectInvalid(call(writer, 'workspace.secrets.set', { key: 'k', value: 'v' }), 'workspace_id');
    await expectInvalid(call(reader, 'workspace.secrets.get', { workspace_id: workspaceId }), 'key');
    await expectInvalid(call(reader, 'workspace.secrets.get', { workspace_id: workspaceId, key: 'a/b' }), 'key');
    await expectInvalid(call(reader, 'workspace.secrets.list', {}), 'workspace_id');
    await expectInvalid(call(reader, 'workspace.secrets.list', { workspace_id: 'not-a-workspace' }), 'workspace_id');
    await expectInvalid(call(writer, 'workspace.secrets.delete', { workspace_id: workspaceId, key: '' }), 'key');
    // Parameters are checked before the workspace is looked up.
    await expectInvalid(call(outsider, 'workspace.secrets.get', { workspace_id: UNKNOWN_WS, key: 'bad key' }), 'key');
  });

  it('-32101 for an unknown workspace or secret, -32100 for non-members, -32102 for readers writing', async () => {
    const workspaceId = await staffed();
    await ok(writer, 'workspace.secrets.set', { workspace_id: workspaceId, key: 'k', value: unique('v') });
    for (const method of ['get', 'set', 'delete', 'list']) {
      await expectError(call(writer, `workspace.secrets.${method}`, { workspace_id: UNKNOWN_WS, key: 'k', value: 'v' }), -32101, 'Workspace not found');
      await expectError(call(outsider, `workspace.secrets.${method}`, { workspace_id: workspaceId, key: 'k', value: 'v' }), -32100, 'Access denied');
    }
    await expectError(call(writer, 'workspace.secrets.get', { workspace_id: workspaceId, key: 'missing' }), -32101, 'Secret not found');
    await expectError(call(writer, 'workspace.secrets.delete', { workspace_id: workspaceId, key: 'missing' }), -32101, 'Secret not found');
    await expectError(call(reader, 'workspace.secrets.set', { workspace_id: workspaceId, key: 'k', value: 'v' }), -32102, 'Write access required');
    await expectError(call(reader, 'workspace.secrets.delete', { workspace_id: workspaceId, key: 'k' }), -32102, 'Write access required');
    await expectError(call(writer, 'workspace.secrets.rotate', { workspace_id: workspaceId }), -32601);
    const unauthenticated = await hub.call(undefined, 'x-hub/workspace.secrets.get', { workspace_id: workspaceId, key: 'k' });
    expect(unauthenticated.status).toBe(401);
    expect(unauthenticated.body.error?.code).toBe(-32000);
  });

  it('a revoked grant, a removed member and a deleted workspace are refused on the very next call', async () => {
    const partner = await hub.agent('globex', `partner-${++seq}`);
    const { grant } = await ok(owner, 'grants.request', { agent_id: partner.agent_id });
    await ok(partner, 'grants.approve', { grant_id: grant.id });
    const workspaceId = await staffed();
    await ok(owner, 'workspace.members.add', { workspace_id: workspaceId, agent_id: partner.agent_id, role: 'write' });
    const value = unique('shared');
    await ok(partner, 'workspace.secrets.set', { workspace_id: workspaceId, key: 'shared', value });
    expect((await ok(partner, 'workspace.secrets.get', { workspace_id: workspaceId, key: 'shared' })).value).toBe(value);
    await ok(partner, 'grants.revoke', { grant_id: grant.id });
    await expectError(call(partner, 'workspace.secrets.get', { workspace_id: workspaceId, key: 'shared' }), -32100, 'Access denied');

    expect((await ok(writer, 'workspace.secrets.get', { workspace_id: workspaceId, key: 'shared' })).value).toBe(value);
    await ok(admin, 'workspace.members.remove', { workspace_id: workspaceId, agent_id: writer.agent_id });
    await expectError(call(writer, 'workspace.secrets.get', { workspace_id: workspaceId, key: 'shared' }), -32100, 'Access denied');

    await ok(owner, 'workspace.delete', { workspace_id: workspaceId });
    await expectError(call(owner, 'workspace.secrets.get', { workspace_id: workspaceId, key: 'shared' }), -32101, 'Workspace not found');
  });

  const onPostgres = backend.name !== 'embedded' ? it : it.skip;
  const why = backend.name !== 'embedded' ? '' : ' (skipped: reads the tables directly, which PGlite keeps inside the hub)';
  onPostgres(`destroys the data key and ciphertexts as soon as the workspace is deleted${why}`, async () => {
    const workspaceId = await staffed();
    await ok(writer, 'workspace.secrets.set', { workspace_id: workspaceId, key: 'doomed', value: unique('doomed') });
    const db = new pg.Client({ connectionString: hub.databaseUrl });
    await db.connect();
    try {
      const count = async (table: string) =>
        Number((await db.query(`SELECT count(*) AS n FROM secrets.${table} WHERE workspace_id = $1`, [workspaceId])).rows[0].n);
      expect(await count('workspace_keys')).toBe(1);
      expect(await count('secrets')).toBe(1);
      await ok(owner, 'workspace.delete', { workspace_id: workspaceId });
      expect(await count('workspace_keys')).toBe(0);
      expect(await count('secrets')).toBe(0);
    } finally {
      await db.end();
    }
  });

  it('the operator rotates the KEK and a workspace key through /admin; values stay readable', async () => {
    const workspaceId = await staffed();
    const value = unique('rotated');
    await ok(writer, 'workspace.secrets.set', { workspace_id: workspaceId, key: 'k', value });
    const kek = await hub.admin('secrets.rotate_kek');
    expect(kek).toEqual({ kek_version: 'v1', rewrapped: 0, failed: 0, total: expect.any(Number) });
    expect(kek.total).toBeGreaterThanOrEqual(1);
    expect(await hub.admin('secrets.rotate_workspace_key', { workspace_id: workspaceId })).toEqual({
      workspace_id: workspaceId,
      generation: 2,
      resealed: 1,
    });
    expect((await ok(reader, 'workspace.secrets.get', { workspace_id: workspaceId, key: 'k' })).value).toBe(value);
    // Agents cannot reach the operator methods.
    const refused = await hub.call(owner.api_key, 'secrets.rotate_kek', {}, { path: '/admin' });
    expect(refused.status).toBe(401);
  });

  it('values never show in /metrics', async () => {
    const workspaceId = await staffed();
    const value = unique('metrics');
    await ok(writer, 'workspace.secrets.set', { workspace_id: workspaceId, key: 'k', value });
    await ok(reader, 'workspace.secrets.get', { workspace_id: workspaceId, key: 'k' });
    const metrics = await (await fetch(`${hub.metricsUrl}/metrics`)).text();
    expect(metrics).toContain('x-hub/workspace.secrets.get');
    expect(metrics).not.toContain(value);
  });
});
