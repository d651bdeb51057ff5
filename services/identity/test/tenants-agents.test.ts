import { Reason } from '@agenthub/runtime';
import { backends, type Backend } from '@agenthub/testing';
import { failure, operator, startHarness, unique, asAgent, type Harness } from './harness.js';

describe.each(backends().map((b) => [b.name, b] as const))('identity tenants and agents (%s)', (_name, backend: Backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(async () => {
    await h?.close();
  });

  describe('CreateTenant and ListTenants', () => {
    it('creates a tenant, then returns it unchanged on a repeat', async () => {
      const id = unique('acme');
      const first = await h.client.createTenant({ tenantId: id, name: '  Acme Corp ' }, operator);
      expect(first.created).toBe(true);
      expect(first.tenant).toMatchObject({ id, name: 'Acme Corp' });
      expect(Number(first.tenant!.createdAt)).toBeGreaterThan(Date.now() - 60_000);

      const again = await h.client.createTenant({ tenantId: id, name: 'Other name' }, operator);
      expect(again.created).toBe(false);
      expect(again.tenant).toEqual(first.tenant);

      const { tenants } = await h.client.listTenants({}, operator);
      expect(tenants.filter((t) => t.id === id)).toEqual([first.tenant]);
    });

    it('names a tenant after its id when no name is given', async () => {
      const id = unique('noname');
      const { tenant } = await h.client.createTenant({ tenantId: id }, operator);
      expect(tenant!.name).toBe(id);
    });

    it.each([
      ['empty', ''],
      ['uppercase', 'Acme'],
      ['leading hyphen', '-acme'],
      ['64 characters', 'a'.repeat(64)],
      ['underscore', 'acme_corp'],
    ])('refuses a tenant id (%s)', async (_label, tenantId) => {
      const err = await failure(h.client.createTenant({ tenantId }, operator));
      expect(err).toMatchObject({ reason: Reason.INVALID_PARAMS, field: 'tenant_id' });
    });

    it('refuses a name over 200 characters', async () => {
      const err = await failure(h.client.createTenant({ tenantId: unique('long'), name: 'x'.repeat(201) }, operator));
      expect(err).toMatchObject({ reason: Reason.INVALID_PARAMS, field: 'name' });
    });
  });

  describe('GetTenantLimits and SetTenantLimits', () => {
    it('stores the operator’s overrides, readable by the tenant’s agents only', async () => {
      const tenantId = unique('lim');
      await h.client.createTenant({ tenantId }, operator);
      const empty = await h.client.getTenantLimits({ tenantId }, operator);
      expect([empty.limits?.key, empty.limits?.tenant, empty.limits?.maxWaitingPerAgent]).toEqual([undefined, undefined, undefined]);
      const set = await h.client.setTenantLimits({ tenantId, limits: { key: { perSec: 2.5, burst: 10 }, maxWaitingPerAgent: 0 } }, operator);
      expect(set.limits).toMatchObject({ key: { perSec: 2.5, burst: 10 }, maxWaitingPerAgent: 0 });
      expect(set.limits?.tenant).toBeUndefined();
      const own = asAgent({ id: 'agent-x', tenantId });
      expect((await h.client.getTenantLimits({ tenantId }, own)).limits).toEqual(set.limits);
      expect(await failure(h.client.getTenantLimits({ tenantId }, asAgent({ id: 'agent-y', tenantId: unique('other') })))).toMatchObject({ reason: Reason.ACCESS_DENIED });
      expect(await failure(h.client.setTenantLimits({ tenantId, limits: {} }, own))).toMatchObject({ reason: Reason.ACCESS_DENIED });
      expect(await failure(h.client.setTenantLimits({ tenantId, limits: { tenant: { perSec: 1, burst: 0 } } }, operator))).toMatchObject({
        reason: Reason.INVALID_PARAMS,
        field: 'limits.tenant.burst',
      });
      expect(await failure(h.client.getTenantLimits({ tenantId: unique('none') }, operator))).toMatchObject({ reason: Reason.NOT_FOUND });
    });

    it('keeps quota overrides by name, refusing unknown quotas and limits under 1', async () => {
      const tenantId = unique('quota');
      await h.client.createTenant({ tenantId }, operator);
      const set = await h.client.setTenantLimits({ tenantId, limits: { quotas: { members_per_workspace: 50n } } }, operator);
      expect(set.limits?.quotas).toEqual({ members_per_workspace: 50n });
      expect((await h.client.getTenantLimits({ tenantId }, operator)).limits?.quotas).toEqual({ members_per_workspace: 50n });
      expect(await failure(h.client.setTenantLimits({ tenantId, limits: { quotas: { bananas: 3n } } }, operator))).toMatchObject({ reason: Reason.INVALID_PARAMS, field: 'limits.quotas.bananas' });
      expect(await failure(h.client.setTenantLimits({ tenantId, limits: { quotas: { agents_per_tenant: 0n } } }, operator))).toMatchObject({
        reason: Reason.INVALID_PARAMS,
        field: 'limits.quotas.agents_per_tenant',
      });
    });
  });

  describe('agents_per_tenant', () => {
    it('refuses agents past the tenant’s quota even when created concurrently, and reports the usage', async () => {
      const tenantId = unique('many');
      await h.client.createTenant({ tenantId }, operator);
      await h.client.setTenantLimits({ tenantId, limits: { quotas: { agents_per_tenant: 3n } } }, operator);
      const results = await Promise.allSettled(Array.from({ length: 6 }, (_, i) => h.client.createAgent({ tenantId, name: `a${i}` }, operator)));
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(3);
      for (const r of results.filter((r) => r.status === 'rejected')) {
        expect(r.reason).toMatchObject({ reason: Reason.QUOTA_EXCEEDED, field: 'agents_per_tenant', message: 'Quota exceeded: a tenant has at most 3 agents' });
      }
      const { usage } = await h.client.getTenantUsage({ tenantId }, operator);
      expect(usage.map((u) => [u.quota, u.scope, u.used, u.limit])).toEqual([['agents_per_tenant', '', 3n, 3n]]);
      expect(await failure(h.client.getTenantUsage({ tenantId }, asAgent({ id: 'agent-x', tenantId })))).toMatchObject({ reason: Reason.ACCESS_DENIED });
    });
  });

  describe('CreateAgent', () => {
    it('registers an agent with every field and issues its first key', async () => {
      const tenantId = unique('t');
      await h.client.createTenant({ tenantId }, operator);
      const res = await h.client.createAgent(
        {
          tenantId,
          name: ' Summariser ',
          agentId: 'summariser.v2_' + tenantId,
          endpointUrl: 'https://agents.example.com/a2a',
          outputModes: ['text/plain', 'application/json', 'TEXT/PLAIN', '*/*', 'image/*'],
        },
        operator,
      );
      expect(res.tenantCreated).toBe(false);
      expect(res.agent).toMatchObject({
        id: 'summariser.v2_' + tenantId,
        tenantId,
        name: 'Summariser',
        endpointUrl: 'https://agents.example.com/a2a',
        outputModes: ['text/plain', 'application/json', '*/*', 'image/*'],
      });
      expect(res.apiKey).toMatch(/^ahk_/);
      expect(res.key).toMatchObject({ agentId: res.agent!.id, prefix: res.apiKey.slice(0, 12), revokedAt: 0n });
      expect(res.key!.id).toMatch(/^key_/);
    });

    it('generates an id when none is given', async () => {
      const tenantId = unique('t');
      const res = await h.client.createAgent({ tenantId, name: 'Anon', createTenant: true }, operator);
      expect(res.agent!.id).toMatch(/^agt_[a-z0-9]{20}$/);
      expect(res.agent!.endpointUrl).toBe('');
      expect(res.agent!.outputModes).toEqual([]);
    });

    it('creates the tenant when asked, and only then', async () => {
      const tenantId = unique('fresh');
      const missing = await failure(h.client.createAgent({ tenantId, name: 'A' }, operator));
      expect(missing).toMatchObject({ reason: Reason.NOT_FOUND, message: 'Tenant not found' });

      const res = await h.client.createAgent({ tenantId, name: 'A', createTenant: true }, operator);
      expect(res.tenantCreated).toBe(true);
      const second = await h.client.createAgent({ tenantId, name: 'B', createTenant: true }, operator);
      expect(second.tenantCreated).toBe(false);
      const { tenants } = await h.client.listTenants({}, operator);
      expect(tenants.find((t) => t.id === tenantId)).toMatchObject({ name: tenantId });
    });

    it('refuses a duplicate agent id and leaves no trace of the attempt', async () => {
      const tenantId = unique('t');
      const agentId = unique('dup');
      await h.client.createAgent({ tenantId, name: 'First', agentId, createTenant: true }, operator);
      const err = await failure(h.client.createAgent({ tenantId, name: 'Second', agentId }, operator));
      expect(err).toMatchObject({ reason: Reason.ALREADY_EXISTS, message: `Agent ${agentId} already exists` });
      const { keys } = await h.client.listApiKeys({ agentId }, operator);
      expect(keys).toHaveLength(1);
      const { agent } = await h.client.getAgent({ agentId }, operator);
      expect(agent!.name).toBe('First');
    });

    it.each([
      ['a malformed tenant id', { tenantId: 'Bad!' }, 'tenant_id'],
      ['an empty name', { name: '' }, 'name'],
      ['a blank name', { name: '   ' }, 'name'],
      ['a 201-character name', { name: 'n'.repeat(201) }, 'name'],
      ['a name with a control character', { name: 'tab\there' }, 'name'],
      ['an agent id starting with a dot', { agentId: '.hidden' }, 'agent_id'],
      ['an agent id with a slash', { agentId: 'a/b' }, 'agent_id'],
      ['a 129-character agent id', { agentId: 'a'.repeat(129) }, 'agent_id'],
      ['an ftp endpoint', { endpointUrl: 'ftp://example.com' }, 'endpoint_url'],
      ['an endpoint that is no URL', { endpointUrl: 'not a url' }, 'endpoint_url'],
      ['an endpoint over 2048 characters', { endpointUrl: 'https://example.com/' + 'p'.repeat(2040) }, 'endpoint_url'],
      // Issue 12: a push endpoint must be global unicast unless the operator allows private targets.
      ['a loopback endpoint', { endpointUrl: 'http://127.0.0.1:9999/a2a' }, 'endpoint_url'],
      ['an endpoint on a private network', { endpointUrl: 'http://intranet.example/a2a' }, 'endpoint_url'],
      ['a cloud metadata endpoint', { endpointUrl: 'http://169.254.169.254/latest' }, 'endpoint_url'],
      ['an IPv4-mapped loopback endpoint', { endpointUrl: 'http://[::ffff:127.0.0.1]/a2a' }, 'endpoint_url'],
      ['a 6to4 endpoint', { endpointUrl: 'http://[2002:7f00:1::1]/a2a' }, 'endpoint_url'],
      ['an endpoint whose host does not resolve', { endpointUrl: 'https://nowhere.invalid/a2a' }, 'endpoint_url'],
      ['an output mode without subtype', { outputModes: ['text/plain', 'plain'] }, 'output_modes.1'],
      ['an output mode with parameters', { outputModes: ['text/plain; charset=utf-8'] }, 'output_modes.0'],
      ['33 output modes', { outputModes: Array.from({ length: 33 }, (_, i) => `text/x-${i}`) }, 'output_modes'],
    ])('refuses %s, naming the field', async (_label, override, field) => {
      const request = { tenantId: unique('t'), name: 'Valid', createTenant: true, ...override };
      const err = await failure(h.client.createAgent(request, operator));
      expect(err).toMatchObject({ reason: Reason.INVALID_PARAMS, field });
    });
  });

  describe('GetAgent and ListAgents', () => {
    it('returns an agent to any principal, never to an anonymous caller', async () => {
      const tenantId = unique('t');
      const { agent } = await h.client.createAgent({ tenantId, name: 'Seen', createTenant: true }, operator);
      expect((await h.client.getAgent({ agentId: agent!.id }, operator)).agent).toEqual(agent);
      const other = { id: 'someone', tenantId: 'elsewhere' };
      expect((await h.client.getAgent({ agentId: agent!.id }, asAgent(other))).agent).toEqual(agent);

      const anonymous = await failure(h.client.getAgent({ agentId: agent!.id }));
      expect(anonymous).toMatchObject({ reason: Reason.UNAUTHENTICATED });
    });

    it('reports unknown and malformed ids', async () => {
      expect(await failure(h.client.getAgent({ agentId: 'nobody-here' }, operator))).toMatchObject({
        reason: Reason.NOT_FOUND,
        message: 'Agent not found',
      });
      expect(await failure(h.client.getAgent({ agentId: '' }, operator))).toMatchObject({
        reason: Reason.INVALID_PARAMS,
        field: 'agent_id',
      });
    });

    it('lists one tenant or all', async () => {
      const t1 = unique('t');
      const t2 = unique('t');
      const a = (await h.client.createAgent({ tenantId: t1, name: 'A', createTenant: true }, operator)).agent!;
      const b = (await h.client.createAgent({ tenantId: t1, name: 'B' }, operator)).agent!;
      const c = (await h.client.createAgent({ tenantId: t2, name: 'C', createTenant: true }, operator)).agent!;

      const { agents } = await h.client.listAgents({ tenantId: t1 }, operator);
      expect(agents.map((x) => x.id).sort()).toEqual([a.id, b.id].sort());
      const all = (await h.client.listAgents({}, operator)).agents.map((x) => x.id);
      expect(all).toEqual(expect.arrayContaining([a.id, b.id, c.id]));

      expect(await failure(h.client.listAgents({ tenantId: unique('ghost') }, operator))).toMatchObject({
        reason: Reason.NOT_FOUND,
        message: 'Tenant not found',
      });
      expect(await failure(h.client.listAgents({ tenantId: 'UPPER' }, operator))).toMatchObject({
        reason: Reason.INVALID_PARAMS,
        field: 'tenant_id',
      });
    });
  });

  describe('operator-only RPCs', () => {
    const agent = asAgent({ id: 'agent-1', tenantId: 'acme' });
    const calls: Array<[string, (opts: typeof agent | undefined) => Promise<unknown>]> = [
      ['CreateTenant', (o) => h.client.createTenant({ tenantId: 'acme' }, o)],
      ['ListTenants', (o) => h.client.listTenants({}, o)],
      ['CreateAgent', (o) => h.client.createAgent({ tenantId: 'acme', name: 'x', createTenant: true }, o)],
      ['ListAgents', (o) => h.client.listAgents({}, o)],
      ['CreateApiKey', (o) => h.client.createApiKey({ agentId: 'agent-1' }, o)],
      ['RevokeApiKey', (o) => h.client.revokeApiKey({ keyId: 'key_abc' }, o)],
      ['ListApiKeys', (o) => h.client.listApiKeys({ agentId: 'agent-1' }, o)],
    ];

    it.each(calls)('%s refuses agents and anonymous callers', async (_rpc, call) => {
      for (const options of [agent, undefined]) {
        expect(await failure(call(options))).toMatchObject({
          reason: Reason.ACCESS_DENIED,
          message: 'Operator access required',
        });
      }
    });

    it('an agent cannot create tenants even with invalid input (access is checked first)', async () => {
      const err = await failure(h.client.createTenant({ tenantId: 'BAD!' }, agent));
      expect(err.reason).toBe(Reason.ACCESS_DENIED);
    });
  });
});

describe.each(backends().map((b) => [b.name, b] as const))('push endpoints and the egress policy (%s)', (_name, backend: Backend) => {
  it('refuses a private endpoint saying why; accepts it when the operator allows private targets', async () => {
    const strict = await startHarness(backend);
    try {
      const err = await failure(strict.client.createAgent({ tenantId: unique('t'), name: 'Local', createTenant: true, endpointUrl: 'http://127.0.0.1:9999/a2a' }, operator));
      expect(err).toMatchObject({ reason: Reason.INVALID_PARAMS, field: 'endpoint_url', message: 'Invalid params: endpoint_url is refused: it names a loopback address' });
      const named = await failure(strict.client.createAgent({ tenantId: unique('t'), name: 'Intranet', createTenant: true, endpointUrl: 'http://intranet.example/a2a' }, operator));
      // The class of address, never the address the name resolved to.
      expect(named.message).toBe('Invalid params: endpoint_url is refused: its host resolves to a private address');
    } finally {
      await strict.close();
    }
    const lab = await startHarness(backend, { allowPrivate: true });
    try {
      const { agent } = await lab.client.createAgent({ tenantId: unique('t'), name: 'Local', createTenant: true, endpointUrl: 'http://127.0.0.1:9999/a2a' }, operator);
      expect(agent!.endpointUrl).toBe('http://127.0.0.1:9999/a2a');
    } finally {
      await lab.close();
    }
  });

  it('a push agent gets a push secret shown once; the operator rotates it; only the operator reads it', async () => {
    const h = await startHarness(backend, { allowPrivate: true });
    try {
      const tenantId = unique('t');
      const created = await h.client.createAgent({ tenantId, name: 'Pushed', createTenant: true, endpointUrl: 'http://127.0.0.1:9999/a2a' }, operator);
      expect(created.pushSecret).toMatch(/^ahp_[A-Za-z0-9_-]{43}$/);
      expect(JSON.stringify((await h.client.getAgent({ agentId: created.agent!.id }, operator)).agent, (_k, v) => (typeof v === 'bigint' ? String(v) : v))).not.toContain(created.pushSecret);
      expect((await h.client.getPushCredential({ agentId: created.agent!.id }, operator)).pushSecret).toBe(created.pushSecret);

      const { pushSecret: rotated } = await h.client.rotatePushSecret({ agentId: created.agent!.id }, operator);
      expect(rotated).toMatch(/^ahp_/);
      expect(rotated).not.toBe(created.pushSecret);
      expect((await h.client.getPushCredential({ agentId: created.agent!.id }, operator)).pushSecret).toBe(rotated);

      const connected = await h.client.createAgent({ tenantId, name: 'Connected' }, operator);
      expect(connected.pushSecret).toBe('');
      expect(await failure(h.client.rotatePushSecret({ agentId: connected.agent!.id }, operator))).toMatchObject({ reason: Reason.INVALID_OPERATION, field: 'agent_id' });
      expect(await failure(h.client.rotatePushSecret({ agentId: 'nobody' }, operator))).toMatchObject({ reason: Reason.NOT_FOUND });
      const asItself = asAgent({ id: created.agent!.id, tenantId });
      expect(await failure(h.client.getPushCredential({ agentId: created.agent!.id }, asItself))).toMatchObject({ reason: Reason.ACCESS_DENIED });
      expect(await failure(h.client.rotatePushSecret({ agentId: created.agent!.id }, asItself))).toMatchObject({ reason: Reason.ACCESS_DENIED });
    } finally {
      await h.close();
    }
  });
});
