import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { createClient } from 'redis';
import { backends } from '@agenthub/testing';
import { startTestHub, type TestHub } from './harness.js';
import { splitMode, type SplitProcessName, type SplitStack } from './split-hub.js';

/** A token every 100 s, so no bucket refills while a test runs. */
const LIMITS = {
  HUB_RATE_KEY_PER_SEC: '0.01',
  HUB_RATE_KEY_BURST: '5',
  HUB_RATE_TENANT_PER_SEC: '1000',
  HUB_RATE_TENANT_BURST: '2000',
  HUB_RATE_ADDRESS_PER_SEC: '0.01',
  HUB_RATE_ADDRESS_BURST: '3',
  // The test client is the proxy that names each request's client in X-Forwarded-For.
  HUB_TRUSTED_PROXIES: '127.0.0.1,::1',
  HUB_MAX_WAITING_PER_AGENT: '2',
  HUB_QUOTA_WORKSPACES_PER_TENANT: '2',
  HUB_QUOTA_MEMORIES_PER_WORKSPACE: '2',
  HUB_QUOTA_MEMORY_BYTES_PER_WORKSPACE: '1000',
  HUB_QUOTA_TASKS_IN_FLIGHT_PER_SENDER: '2',
  HUB_QUOTA_AGENTS_PER_TENANT: '5',
  HUB_QUOTA_MEMBERS_PER_WORKSPACE: '5',
  HUB_QUOTA_QUEUED_DELIVERIES_PER_AGENT: '5',
  // Webhook URLs are taken without a DNS look-up.
  HUB_EGRESS_ALLOW_PRIVATE: 'true',
  // Every scrape reads quota usage afresh.
  HUB_METRICS_QUOTA_REFRESH_MS: '0',
};

/** The quota gauges of one tenant and quota in a /metrics text: used, limit and their ratio. */
function quotaGauges(text: string, tenant: string, quota: string) {
  const value = (name: string) => {
    const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && l.includes(`tenant="${tenant}"`) && l.includes(`quota="${quota}"`));
    return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
  };
  return { used: value('agenthub_quota_used'), limit: value('agenthub_quota_limit'), ratio: value('agenthub_quota_usage_ratio') };
}

let nextId = 1;

/** One JSON-RPC request (a call or a batch) on `url`, from the client address `from`. */
async function post(url: string, key: string | undefined, body: unknown, from: string) {
  const headers: Record<string, string> = { 'Content-Type': 'application/json', 'X-Forwarded-For': from };
  if (key) headers.Authorization = `Bearer ${key}`;
  const response = await fetch(`${url}/a2a`, { method: 'POST', headers, body: JSON.stringify(body) });
  return { status: response.status, headers: response.headers, body: (await response.json()) as any };
}

const call = (method: string, params: unknown = {}) => ({ jsonrpc: '2.0', id: nextId++, method, params });
const list = () => call('x-hub/workspace.list');

function expectLimited(reply: { status: number; headers: Headers; body: any }, scope?: string) {
  expect(reply.status).toBe(429);
  expect(Number(reply.headers.get('Retry-After'))).toBeGreaterThanOrEqual(1);
  const errors = Array.isArray(reply.body) ? reply.body.map((r: any) => r.error) : [reply.body.error];
  for (const error of errors) {
    expect(error.code).toBe(-32029);
    expect(error.data.reason).toBe('rate_limited');
    expect(error.data.retry_after_ms).toBeGreaterThan(0);
    if (scope === 'waiting') expect(error.message.startsWith('Too many waiting calls: an agent may hold at most 2 ')).toBe(true);
    else if (scope) expect(error.message).toBe(`Rate limit exceeded (${scope}); retry after ${reply.headers.get('Retry-After')} s`);
  }
}

/** The MCP SDK's own client on `url`'s `/mcp`, as the agent of `key`, from the client address `from`. */
async function mcpClient(url: string, key: string, from: string): Promise<Client> {
  const mcp = new Client({ name: 'rl-test', version: '1.0.0' });
  await mcp.connect(
    new StreamableHTTPClientTransport(new URL('/mcp', url), { requestInit: { headers: { Authorization: `Bearer ${key}`, 'X-Forwarded-For': from } } }),
  );
  return mcp;
}

/** A tool call past the waiting-call cap: a tool error carrying the refusal a JSON-RPC call gets. */
function expectCapped(result: CallToolResult) {
  expect(result.isError).toBe(true);
  const { error } = result.structuredContent as { error: { code: number; message: string; data: { reason: string; retry_after_ms: number } } };
  expect(error).toMatchObject({ code: -32029, data: { reason: 'rate_limited', retry_after_ms: expect.any(Number) } });
  expect(error.message.startsWith('Too many waiting calls: an agent may hold at most 2 ')).toBe(true);
  expect((result.content as { text: string }[])[0]!.text).toBe(`Error -32029: ${error.message}`);
}

/**
 * The quotas of agents, members and queued deliveries, overridden for one tenant, and the usage
 * of every quota; run on each backend and in split mode, where each is checked by its own service.
 */
async function tenantQuotas(hub: TestHub) {
  const owner = await hub.agent('rl-q2', 'owner');
  const set = await hub.admin('tenants.set_limits', {
    tenant_id: 'rl-q2',
    limits: { key: { per_sec: 0.01, burst: 100 }, quotas: { agents_per_tenant: 3, members_per_workspace: 2, queued_deliveries_per_agent: 1 } },
  });
  expect(set.limits.quotas).toEqual({ agents_per_tenant: 3, members_per_workspace: 2, queued_deliveries_per_agent: 1 });
  const admin = { path: '/admin', headers: { Authorization: `Bearer ${hub.adminToken}` } };
  const unknown = await hub.call(undefined, 'tenants.set_limits', { tenant_id: 'rl-q2', limits: { quotas: { workspaces_per_tenant: 3 } } }, admin);
  expect(unknown.body.error).toMatchObject({ code: -32602, data: { field: expect.stringMatching(/^limits\.quotas/) } });
  const zero = await hub.call(undefined, 'tenants.set_limits', { tenant_id: 'rl-q2', limits: { quotas: { agents_per_tenant: 0 } } }, admin);
  expect(zero.body.error).toMatchObject({ code: -32602, data: { field: 'limits.quotas.agents_per_tenant' } });
  const second = await hub.agent('rl-q2', 'second');
  const third = await hub.agent('rl-q2', 'third');
  const fourth = await hub.call(undefined, 'agents.create', { tenant_id: 'rl-q2', name: 'fourth' }, admin);
  expect(fourth.body.error).toMatchObject({ code: -32029, message: 'Quota exceeded: a tenant has at most 3 agents', data: { reason: 'quota_exceeded', field: 'agents_per_tenant' } });
  // Another tenant keeps the default (HUB_QUOTA_AGENTS_PER_TENANT).
  await hub.admin('tenants.create', { tenant_id: 'rl-q2-default' });
  expect((await hub.admin('tenants.get_limits', { tenant_id: 'rl-q2-default' })).limits.quotas.agents_per_tenant).toBe(5);

  const ws = (await post(hub.url, owner.api_key, call('x-hub/workspace.create', { name: 'members' }), '10.0.0.8')).body.result.workspace.id;
  const add = (agentId: string, role = 'read') => post(hub.url, owner.api_key, call('x-hub/workspace.members.add', { workspace_id: ws, agent_id: agentId, role }), '10.0.0.8');
  expect((await add(second.agent_id)).body.result).toBeDefined();
  const full = await add(third.agent_id);
  expect(full.body.error).toMatchObject({ code: -32029, message: 'Quota exceeded: a workspace has at most 2 members; remove one first', data: { field: 'members_per_workspace' } });
  // A member's role change needs no room.
  expect((await add(second.agent_id, 'write')).body.result).toBeDefined();

  const send = () => post(hub.url, owner.api_key, call('SendMessage', { message: { role: 'user', parts: [{ kind: 'text', text: 'hi' }] }, configuration: { agentId: third.agent_id } }), '10.0.0.8');
  expect((await send()).body.result.status.state).toBe('submitted');
  const queued = await send();
  expect(queued.body.error).toMatchObject({ code: -32029, data: { reason: 'quota_exceeded', field: 'queued_deliveries_per_agent' } });
  expect(queued.body.error.message.startsWith('Quota exceeded: the recipient has 1 deliveries waiting')).toBe(true);

  const rpc = async (method: string, params: unknown) => {
    const reply = await post(hub.url, owner.api_key, call(method, params), '10.0.0.8');
    expect(reply.body.error).toBeUndefined();
  };
  await rpc('x-hub/workspace.secrets.set', { workspace_id: ws, key: 'TOKEN', value: 's3cret' });
  await rpc('x-hub/webhooks.create', { workspace_id: ws, url: 'https://hooks.example.com/a' });
  await rpc('x-hub/webhooks.create', { scope: 'agent', url: 'https://hooks.example.com/b' });
  await rpc('x-hub/webhooks.create', { scope: 'agent', url: 'https://hooks.example.com/c' });

  const { usage } = await hub.admin('tenants.usage', { tenant_id: 'rl-q2' });
  expect(usage).toContainEqual({ quota: 'agents_per_tenant', scope: '', used: 3, limit: 3 });
  expect(usage).toContainEqual({ quota: 'workspaces_per_tenant', scope: '', used: 1, limit: 2 });
  expect(usage).toContainEqual({ quota: 'members_per_workspace', scope: ws, used: 2, limit: 2 });
  expect(usage).toContainEqual({ quota: 'secrets_per_workspace', scope: ws, used: 1, limit: 1000 });
  expect(usage).toContainEqual({ quota: 'webhooks_per_workspace', scope: ws, used: 1, limit: 20 });
  expect(usage).toContainEqual({ quota: 'webhooks_per_agent', scope: owner.agent_id, used: 2, limit: 20 });
  expect(usage).toContainEqual({ quota: 'webhooks_per_agent', scope: second.agent_id, used: 0, limit: 20 });
  expect(usage).toContainEqual({ quota: 'tasks_in_flight_per_sender', scope: owner.agent_id, used: 1, limit: 2 });
  expect(usage).toContainEqual({ quota: 'queued_deliveries_per_agent', scope: third.agent_id, used: 1, limit: 1 });
}

/**
 * The quotas of workspaces per tenant and of memories (count and bytes) per workspace, each
 * refusal naming its quota; run on each backend and in split mode.
 */
async function workspaceQuotas(hub: TestHub) {
  const agent = await hub.agent('rl-quota', 'a');
  const other = await hub.agent('rl-quota-other', 'b');
  await hub.admin('tenants.set_limits', { tenant_id: 'rl-quota', limits: { key: { per_sec: 0.01, burst: 100 } } });
  const create = (key: string) => post(hub.url, key, call('x-hub/workspace.create', { name: 'q' }), '10.0.0.6');
  const first = await create(agent.api_key);
  const second = await create(agent.api_key);
  const refused = await create(agent.api_key);
  expect(refused.status).toBe(429);
  expect(refused.body.error).toMatchObject({ code: -32029, message: expect.stringContaining('at most 2 workspaces'), data: { reason: 'quota_exceeded', field: 'workspaces_per_tenant' } });
  expect(refused.body.error.data.retry_after_ms).toBeUndefined();
  // Another tenant has its own quota.
  expect((await create(other.api_key)).status).toBe(200);

  const ws = first.body.result.workspace.id;
  const store = (content: string) => post(hub.url, agent.api_key, call('x-hub/workspace.store', { workspace_id: ws, content }), '10.0.0.6');
  expect((await store('The first memory.')).status).toBe(200);
  expect((await store('The second memory.')).status).toBe(200);
  const full = await store('One memory too many.');
  expect(full.body.error).toMatchObject({ code: -32029, data: { field: 'memories_per_workspace' } });
  // A duplicate merges into an existing memory: no new one, no refusal.
  expect((await store('The first memory.')).status).toBe(200);

  // Bytes of content per workspace (HUB_QUOTA_MEMORY_BYTES_PER_WORKSPACE, 1000): the second
  // workspace takes 600 and refuses 600 more, with one memory of its two left.
  const storeIn = (content: string) => post(hub.url, agent.api_key, call('x-hub/workspace.store', { workspace_id: second.body.result.workspace.id, content }), '10.0.0.6');
  expect((await storeIn(`${'a'.repeat(599)}.`)).status).toBe(200);
  const heavy = await storeIn(`${'b'.repeat(599)}.`);
  expect(heavy.body.error).toMatchObject({ code: -32029, message: 'Quota exceeded: a workspace holds at most 1000 bytes of memories; forget some first', data: { reason: 'quota_exceeded', field: 'memory_bytes_per_workspace' } });

  const { usage } = await hub.admin('tenants.usage', { tenant_id: 'rl-quota' });
  expect(usage).toContainEqual({ quota: 'workspaces_per_tenant', scope: '', used: 2, limit: 2 });
  expect(usage).toContainEqual({ quota: 'memories_per_workspace', scope: ws, used: 2, limit: 2 });
  expect(usage).toContainEqual({ quota: 'memory_bytes_per_workspace', scope: ws, used: 'The first memory.The second memory.'.length, limit: 1000 });
}

describe.each(backends())('Rate limits and caps on $name', (backend) => {
  let hub: TestHub;
  beforeAll(async () => {
    hub = await startTestHub(backend, { ...LIMITS, HUB_EMBEDDED_STORAGE: 'disk' });
  });
  afterAll(() => hub?.stop());

  it('limits each API key, counting every call of a batch, with 429 and RateLimit headers', async () => {
    const a = await hub.agent('rl-key', 'a');
    const b = await hub.agent('rl-key', 'b');
    const first = await post(hub.url, a.api_key, list(), '10.0.0.1');
    expect(first.status).toBe(200);
    expect(first.headers.get('RateLimit-Limit')).toBe('5');
    expect(first.headers.get('RateLimit-Remaining')).toBe('4');
    // Four calls left of the burst but the batch holds five: refused as a whole, nothing taken.
    const over = await post(hub.url, a.api_key, [list(), list(), list(), list(), list()], '10.0.0.1');
    expectLimited(over, 'key');
    expect(over.body).toHaveLength(5);
    expect(over.headers.get('RateLimit-Remaining')).toBe('4');
    const batch = await post(hub.url, a.api_key, [list(), list(), list(), list()], '10.0.0.1');
    expect(batch.status).toBe(200);
    expect(batch.headers.get('RateLimit-Remaining')).toBe('0');
    expectLimited(await post(hub.url, a.api_key, list(), '10.0.0.1'), 'key');
    // Another key of the same tenant draws from its own bucket.
    expect((await post(hub.url, b.api_key, list(), '10.0.0.1')).status).toBe(200);
  });

  it('limits MCP tool calls with the same key bucket as JSON-RPC calls', async () => {
    const a = await hub.agent('rl-mcp', 'a');
    const mcp = (id: number) =>
      fetch(`${hub.url}/mcp`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', Authorization: `Bearer ${a.api_key}`, 'X-Forwarded-For': '10.0.0.9' },
        body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/list', params: {} }),
      });
    expect((await post(hub.url, a.api_key, [list(), list(), list(), list()], '10.0.0.9')).status).toBe(200);
    const last = await mcp(1);
    expect(last.status).toBe(200);
    expect(last.headers.get('RateLimit-Remaining')).toBe('0');
    await last.text();
    const over = await mcp(2);
    expectLimited({ status: over.status, headers: over.headers, body: await over.json() }, 'key');
    // The bucket is the key's, whichever endpoint drew it.
    expectLimited(await post(hub.url, a.api_key, list(), '10.0.0.9'), 'key');
  });

  it('limits a tenant across its keys, with the operator’s per-tenant override', async () => {
    const a = await hub.agent('rl-tenant', 'a');
    const b = await hub.agent('rl-tenant', 'b');
    const other = await hub.agent('rl-other', 'c');
    const set = await hub.admin('tenants.set_limits', { tenant_id: 'rl-tenant', limits: { tenant: { per_sec: 0.01, burst: 3 } } });
    expect(set.limits.tenant).toEqual({ per_sec: 0.01, burst: 3 });
    expect(set.limits.key).toEqual({ per_sec: 0.01, burst: 5 });
    const got = await hub.admin('tenants.get_limits', { tenant_id: 'rl-tenant' });
    expect(got.overrides).toEqual({ tenant: { per_sec: 0.01, burst: 3 } });

    expect((await post(hub.url, a.api_key, [list(), list()], '10.0.0.2')).status).toBe(200);
    expect((await post(hub.url, b.api_key, list(), '10.0.0.2')).status).toBe(200);
    expectLimited(await post(hub.url, b.api_key, list(), '10.0.0.2'), 'tenant');
    expect((await post(hub.url, other.api_key, list(), '10.0.0.2')).status).toBe(200);

    const bad = await hub.call(undefined, 'tenants.set_limits', { tenant_id: 'rl-tenant', limits: { key: { per_sec: -1, burst: 3 } } }, { path: '/admin', headers: { Authorization: `Bearer ${hub.adminToken}` } });
    expect(bad.body.error?.code).toBe(-32602);
    expect(bad.body.error?.data.field).toBe('limits.key.per_sec');
    const unknown = await hub.call(undefined, 'tenants.get_limits', { tenant_id: 'no-such-tenant' }, { path: '/admin', headers: { Authorization: `Bearer ${hub.adminToken}` } });
    expect(unknown.body.error).toMatchObject({ code: -32101, message: 'Tenant not found' });
  });

  it('limits failed authentications and card fetches per client address, then refuses before any lookup', async () => {
    const from = '10.0.0.3';
    for (let i = 0; i < 3; i++) {
      const reply = await post(hub.url, `ahk_${'x'.repeat(43)}`, list(), from);
      expect(reply.status).toBe(401);
    }
    expectLimited(await post(hub.url, `ahk_${'x'.repeat(43)}`, list(), from), 'address');
    const card = await fetch(`${hub.url}/.well-known/agent-card.json`, { headers: { 'X-Forwarded-For': from } });
    expect(card.status).toBe(429);
    expect(card.headers.get('Retry-After')).toBeTruthy();
    // Another address is not affected.
    const elsewhere = await fetch(`${hub.url}/.well-known/agent-card.json`, { headers: { 'X-Forwarded-For': '10.0.0.4' } });
    expect(elsewhere.status).toBe(200);
  });

  it('limits failed operator authentications on /admin per client address', async () => {
    const admin = (token: string) =>
      fetch(`${hub.url}/admin`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}`, 'X-Forwarded-For': '10.0.0.12' },
        body: JSON.stringify(call('tenants.list')),
      });
    for (let i = 0; i < 3; i++) expect((await admin('not-the-token')).status).toBe(401);
    const refused = await admin('not-the-token');
    expectLimited({ status: refused.status, headers: refused.headers, body: await refused.json() }, 'address');
    // Refused before the token is even compared: the right one waits for the address's tokens too.
    expect((await admin(hub.adminToken)).status).toBe(429);
  });

  it('caps the waiting calls of an agent, counting those inside a batch', async () => {
    const agent = await hub.agent('rl-wait', 'a');
    // Enough calls that only the cap refuses.
    await hub.admin('tenants.set_limits', { tenant_id: 'rl-wait', limits: { key: { per_sec: 0.01, burst: 100 } } });
    const poll = () => call('x-hub/inbox.poll', { wait_ms: 3_000 });
    const started = Date.now();
    const tooMany = await post(hub.url, agent.api_key, [poll(), poll(), poll()], '10.0.0.5');
    expectLimited(tooMany, 'waiting');
    // Refused at once, not held.
    expect(Date.now() - started).toBeLessThan(2_000);
    const holding = post(hub.url, agent.api_key, [poll(), poll()], '10.0.0.5');
    // The two polls are open once a third is refused; poll until then rather than sleep.
    let third: Awaited<ReturnType<typeof post>> | undefined;
    for (let i = 0; i < 20; i++) {
      third = await post(hub.url, agent.api_key, call('x-hub/inbox.poll', { wait_ms: 100 }), '10.0.0.5');
      if (third.status === 429) break;
    }
    expectLimited(third!, 'waiting');
    expect((await holding).status).toBe(200);
    // Released once answered.
    expect((await post(hub.url, agent.api_key, call('x-hub/inbox.poll', { wait_ms: 10 }), '10.0.0.5')).status).toBe(200);
  });

  it('counts the MCP endpoint\'s waiting tool calls against the same cap, refusing with the same error', async () => {
    const agent = await hub.agent('rl-mcp-wait', 'a');
    const peer = await hub.agent('rl-mcp-wait', 'peer');
    // Its loops retry a refused tool call at once, each drawing a token: a loaded run spent 100.
    await hub.admin('tenants.set_limits', { tenant_id: 'rl-mcp-wait', limits: { key: { per_sec: 0.01, burst: 10_000 } } });
    const mcp = await mcpClient(hub.url, agent.api_key, '10.0.0.10');
    const tool = async (name: string, args: Record<string, unknown>) => (await mcp.callTool({ name, arguments: args })) as CallToolResult;
    try {
      // Two JSON-RPC long-polls hold the cap: a waiting tool call is refused at once, until they end.
      const holding = post(hub.url, agent.api_key, [call('x-hub/inbox.poll', { wait_ms: 8_000 }), call('x-hub/inbox.poll', { wait_ms: 8_000 })], '10.0.0.10');
      const until = Date.now() + 7_000;
      let polled: CallToolResult;
      do polled = await tool('read_inbox', { wait_ms: 100 });
      while (!polled.isError && Date.now() < until);
      expectCapped(polled);
      // A send that waits for its answer is refused before anything is sent; one that does not wait passes.
      expectCapped(await tool('send_message', { agent_id: peer.agent_id, text: 'refused' }));
      const sent = await tool('send_message', { agent_id: peer.agent_id, text: 'not waiting', wait: false });
      expect(sent.isError).toBeFalsy();
      const inbox = await post(hub.url, peer.api_key, call('x-hub/inbox.poll', { max: 10 }), '10.0.0.10');
      expect(inbox.body.result.deliveries.map((d: any) => d.message.parts[0].text)).toEqual(['not waiting']);
      expect((await holding).status).toBe(200);

      // And the other way: two waiting tool calls hold the cap against a JSON-RPC long-poll. (The
      // polls' slots are freed just after their answer is written: a read refused till then is tried again.)
      const read = async () => {
        let result: CallToolResult;
        do result = await tool('read_inbox', { wait_ms: 8_000 });
        while (result.isError && (result.structuredContent as { error: { code: number } }).error.code === -32029);
        return result;
      };
      const reading = [read(), read()];
      const readUntil = Date.now() + 7_000;
      let third: Awaited<ReturnType<typeof post>>;
      do third = await post(hub.url, agent.api_key, call('x-hub/inbox.poll', { wait_ms: 100 }), '10.0.0.10');
      while (third.status !== 429 && Date.now() < readUntil);
      expectLimited(third, 'waiting');
      for (const read of await Promise.all(reading)) expect(read.isError).toBeFalsy();
      // Freed when the tool calls end.
      expect((await tool('read_inbox', { wait_ms: 10 })).isError).toBeFalsy();
    } finally {
      await mcp.close();
    }
  }, 60_000);

  it('counts open streams and blocking sends against the waiting-call cap, not plain sends; a closed stream frees its slot', async () => {
    const agent = await hub.agent('rl-wait-kinds', 'a');
    const peer = await hub.agent('rl-wait-kinds', 'peer');
    await hub.admin('tenants.set_limits', { tenant_id: 'rl-wait-kinds', limits: { key: { per_sec: 0.01, burst: 100 } } });
    const hangUp = new AbortController();
    const stream = () =>
      fetch(`${hub.url}/a2a`, {
        method: 'POST',
        signal: hangUp.signal,
        headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream', Authorization: `Bearer ${agent.api_key}`, 'X-Forwarded-For': '10.0.0.11' },
        body: JSON.stringify(call('x-hub/inbox.stream', {})),
      });
    const streams = [await stream(), await stream()];
    expect(streams.map((s) => s.status)).toEqual([200, 200]);
    const send = (configuration: Record<string, unknown>) =>
      post(hub.url, agent.api_key, call('SendMessage', { message: { role: 'user', parts: [{ kind: 'text', text: 'hi' }] }, configuration: { agentId: peer.agent_id, ...configuration } }), '10.0.0.11');
    expectLimited(await send({ blocking: true }), 'waiting');
    expectLimited(await post(hub.url, agent.api_key, call('x-hub/inbox.stream', {}), '10.0.0.11'), 'waiting');
    expect((await send({})).body.result.status.state).toBe('submitted');
    hangUp.abort();
    // The gateway frees the slots when it sees the connections close.
    let after: Awaited<ReturnType<typeof post>> | undefined;
    for (let i = 0; i < 50 && after?.status !== 200; i++) after = await post(hub.url, agent.api_key, [call('x-hub/inbox.poll', { wait_ms: 10 }), call('x-hub/inbox.poll', { wait_ms: 10 })], '10.0.0.11');
    expect(after!.status).toBe(200);
  });

  it('refuses past a quota, naming it', () => workspaceQuotas(hub));

  it('refuses a send past the sender\'s tasks in flight (submitted or working), naming the quota', async () => {
    const sender = await hub.agent('rl-inflight', 'sender');
    const recipient = await hub.agent('rl-inflight', 'recipient');
    await hub.admin('tenants.set_limits', { tenant_id: 'rl-inflight', limits: { key: { per_sec: 0.01, burst: 100 } } });
    const send = () => post(hub.url, sender.api_key, call('SendMessage', { message: { role: 'user', parts: [{ kind: 'text', text: 'hi' }] }, configuration: { agentId: recipient.agent_id } }), '10.0.0.7');
    expect((await send()).body.result.status.state).toBe('submitted');
    expect((await send()).body.result.status.state).toBe('submitted');
    const refused = await send();
    expect(refused.status).toBe(429);
    expect(refused.body.error).toMatchObject({ code: -32029, data: { reason: 'quota_exceeded', field: 'tasks_in_flight_per_sender' } });
  });

  it('refuses agents, members and queued deliveries past the tenant’s quotas (overridden per tenant), and shows every quota’s usage', () => tenantQuotas(hub));

  it('counts refusals by reason and tenant in /metrics', async () => {
    const text = await (await fetch(`${hub.metricsUrl}/metrics`)).text();
    expect(text).toMatch(/agenthub_limited_requests_total\{reason="key",tenant="rl-key"\} [1-9]/);
    expect(text).toMatch(/agenthub_limited_requests_total\{reason="tenant",tenant="rl-tenant"\} [1-9]/);
    expect(text).toMatch(/agenthub_limited_requests_total\{reason="address",tenant=""\} [1-9]/);
    expect(text).toMatch(/agenthub_limited_requests_total\{reason="waiting",tenant="rl-wait"\} [1-9]/);
    expect(text).toMatch(/agenthub_limited_requests_total\{reason="workspaces_per_tenant",tenant="rl-quota"\} 1/);
    expect(text).toMatch(/agenthub_limited_requests_total\{reason="memories_per_workspace",tenant="rl-quota"\} 1/);
    expect(text).toMatch(/agenthub_limited_requests_total\{reason="memory_bytes_per_workspace",tenant="rl-quota"\} 1/);
    expect(text).toMatch(/agenthub_limited_requests_total\{reason="members_per_workspace",tenant="rl-q2"\} 1/);
    // The operator creates agents: the refusal has no caller tenant.
    expect(text).toMatch(/agenthub_limited_requests_total\{reason="agents_per_tenant",tenant=""\} 1/);
    expect(text).toMatch(/agenthub_limited_requests_total\{reason="queued_deliveries_per_agent",tenant="rl-q2"\} 1/);
    expect(text).toMatch(/agenthub_limited_requests_total\{reason="tasks_in_flight_per_sender",tenant="rl-inflight"\} 1/);
  });

  it('shows each tenant’s quota usage and limit (its override, else the default) in /metrics', async () => {
    const text = await (await fetch(`${hub.metricsUrl}/metrics`)).text();
    // Identity: agents, overridden to 3 for rl-q2; others keep HUB_QUOTA_AGENTS_PER_TENANT.
    expect(quotaGauges(text, 'rl-q2', 'agents_per_tenant')).toEqual({ used: 3, limit: 3, ratio: 1 });
    expect(quotaGauges(text, 'rl-key', 'agents_per_tenant')).toEqual({ used: 2, limit: 5, ratio: 0.4 });
    // Workspace: workspaces, and the fullest workspace's memories, bytes and members.
    expect(quotaGauges(text, 'rl-quota', 'workspaces_per_tenant')).toEqual({ used: 2, limit: 2, ratio: 1 });
    expect(quotaGauges(text, 'rl-quota', 'memories_per_workspace')).toEqual({ used: 2, limit: 2, ratio: 1 });
    // The fullest workspace's: the second one's 600 bytes, not the first one's 35.
    expect(quotaGauges(text, 'rl-quota', 'memory_bytes_per_workspace')).toEqual({ used: 600, limit: 1000, ratio: 0.6 });
    expect(quotaGauges(text, 'rl-q2', 'members_per_workspace')).toEqual({ used: 2, limit: 2, ratio: 1 });
    // Messaging: the busiest sender's tasks in flight, and the fullest inbox's undelivered
    // deliveries, overridden to 1 for rl-q2; rl-inflight keeps HUB_QUOTA_QUEUED_DELIVERIES_PER_AGENT.
    expect(quotaGauges(text, 'rl-inflight', 'tasks_in_flight_per_sender')).toEqual({ used: 2, limit: 2, ratio: 1 });
    expect(quotaGauges(text, 'rl-q2', 'queued_deliveries_per_agent')).toEqual({ used: 1, limit: 1, ratio: 1 });
    expect(quotaGauges(text, 'rl-inflight', 'queued_deliveries_per_agent')).toEqual({ used: 2, limit: 5, ratio: 0.4 });
    // Events: the agent with the most agent-wide webhooks.
    expect(quotaGauges(text, 'rl-q2', 'webhooks_per_agent')).toEqual({ used: 2, limit: 20, ratio: 0.1 });

    // Read at scrape time: a new workspace shows in the next scrape.
    const agent = await hub.agent('rl-gauge', 'a');
    expect(quotaGauges(await (await fetch(`${hub.metricsUrl}/metrics`)).text(), 'rl-gauge', 'workspaces_per_tenant').used).toBeUndefined();
    expect((await post(hub.url, agent.api_key, call('x-hub/workspace.create', { name: 'g' }), '10.0.0.10')).status).toBe(200);
    expect(quotaGauges(await (await fetch(`${hub.metricsUrl}/metrics`)).text(), 'rl-gauge', 'workspaces_per_tenant')).toEqual({ used: 1, limit: 2, ratio: 0.5 });
  });

  it('keeps a tenant’s overrides across a restart', async () => {
    hub = await hub.restart();
    const got = await hub.admin('tenants.get_limits', { tenant_id: 'rl-tenant' });
    expect(got.overrides).toEqual({ tenant: { per_sec: 0.01, burst: 3 } });
    expect(got.limits.tenant).toEqual({ per_sec: 0.01, burst: 3 });
  });
});

const real = backends().find((b) => b.name === 'postgres+redis');
(real ? describe : describe.skip)('Rate limits across two gateway replicas (split mode)', () => {
  let hub: TestHub & SplitStack;
  let secondUrl: string;

  beforeAll(async () => {
    hub = await startTestHub(splitMode(real!), LIMITS);
    secondUrl = (await hub.addGateway()).url;
  }, 240_000);
  afterAll(() => hub?.stop(), 120_000);

  it('holds a key’s limit across replicas', async () => {
    const agent = await hub.agent('rl-split', 'a');
    expect((await post(hub.url, agent.api_key, [list(), list(), list()], '10.1.0.1')).status).toBe(200);
    expect((await post(secondUrl, agent.api_key, [list(), list()], '10.1.0.1')).status).toBe(200);
    expectLimited(await post(secondUrl, agent.api_key, list(), '10.1.0.1'), 'key');
    expectLimited(await post(hub.url, agent.api_key, list(), '10.1.0.1'), 'key');
  });

  it('holds a tenant’s limit across replicas', async () => {
    const a = await hub.agent('rl-split-tenant', 'a');
    const b = await hub.agent('rl-split-tenant', 'b');
    await hub.admin('tenants.set_limits', { tenant_id: 'rl-split-tenant', limits: { tenant: { per_sec: 0.01, burst: 3 } } });
    expect((await post(hub.url, a.api_key, [list(), list()], '10.1.0.4')).status).toBe(200);
    expect((await post(secondUrl, b.api_key, list(), '10.1.0.4')).status).toBe(200);
    expectLimited(await post(secondUrl, b.api_key, list(), '10.1.0.4'), 'tenant');
    expectLimited(await post(hub.url, a.api_key, list(), '10.1.0.4'), 'tenant');
  });

  it('holds an address’s limit across replicas', async () => {
    const badKey = `ahk_${'y'.repeat(43)}`;
    expect((await post(hub.url, badKey, list(), '10.1.0.2')).status).toBe(401);
    expect((await post(secondUrl, badKey, list(), '10.1.0.2')).status).toBe(401);
    expect((await post(hub.url, badKey, list(), '10.1.0.2')).status).toBe(401);
    expectLimited(await post(secondUrl, badKey, list(), '10.1.0.2'), 'address');
  });

  it('refuses agents, members and queued deliveries past the tenant’s quotas, each service reading the tenant’s overrides', () => tenantQuotas(hub), 60_000);

  it('refuses workspaces and memories past their quotas, naming them', () => workspaceQuotas(hub), 60_000);

  it('shows each quota’s usage on the /metrics of the service owning it', async () => {
    const metrics = async (name: SplitProcessName) => (await fetch(`${hub.processes[name].opsUrl}/metrics`)).text();
    expect(quotaGauges(await metrics('identity'), 'rl-q2', 'agents_per_tenant')).toEqual({ used: 3, limit: 3, ratio: 1 });
    // Either replica of a service reads the same database.
    expect(quotaGauges(await metrics('workspace-b'), 'rl-q2', 'members_per_workspace')).toEqual({ used: 2, limit: 2, ratio: 1 });
    expect(quotaGauges(await metrics('messaging-a'), 'rl-q2', 'tasks_in_flight_per_sender')).toEqual({ used: 1, limit: 2, ratio: 0.5 });
    expect(quotaGauges(await metrics('messaging-b'), 'rl-q2', 'queued_deliveries_per_agent')).toEqual({ used: 1, limit: 1, ratio: 1 });
    expect(quotaGauges(await metrics('events'), 'rl-q2', 'webhooks_per_agent')).toEqual({ used: 2, limit: 20, ratio: 0.1 });
    // A quota's gauges are the owning service's alone.
    expect(quotaGauges(await metrics('workspace-a'), 'rl-q2', 'agents_per_tenant').used).toBeUndefined();
    expect(quotaGauges(await (await fetch(`${hub.gatewayOpsUrl}/metrics`)).text(), 'rl-q2', 'members_per_workspace').used).toBeUndefined();
  });

  it('holds an agent’s waiting-call cap across replicas, and frees it when the calls end', async () => {
    const agent = await hub.agent('rl-split-wait', 'a');
    await hub.admin('tenants.set_limits', { tenant_id: 'rl-split-wait', limits: { key: { per_sec: 0.01, burst: 100 } } });
    const poll = (waitMs: number) => call('x-hub/inbox.poll', { wait_ms: waitMs });
    // Two polls held open through the first replica: the second one refuses a third, asked once
    // the first replica holds their two slots (its leased set in Redis), which a loaded machine
    // may take seconds to reach. They wait 20 s, long enough for the third call and the MCP one.
    const holding = post(hub.url, agent.api_key, [poll(20_000), poll(20_000)], '10.1.0.3');
    const redis = createClient({ url: hub.redisUrl });
    await redis.connect();
    try {
      const slots = `${hub.redisPrefix}wait:${agent.agent_id}`;
      for (const until = Date.now() + 30_000; (await redis.zCard(slots)) < 2; await new Promise((resolve) => setTimeout(resolve, 50))) {
        if (Date.now() > until) throw new Error('the first replica never held the two polls');
      }
    } finally {
      await redis.quit();
    }
    expectLimited(await post(secondUrl, agent.api_key, poll(100), '10.1.0.3'), 'waiting');
    // So does its MCP endpoint, for a tool call that waits. (Connected only now: a replica that
    // already knows the key would admit the third poll before the first replica admits the two.)
    const mcp = await mcpClient(secondUrl, agent.api_key, '10.1.0.3');
    try {
      expectCapped((await mcp.callTool({ name: 'read_inbox', arguments: { wait_ms: 100 } })) as CallToolResult);
    } finally {
      await mcp.close();
    }
    const held = await holding;
    expect(held.status).toBe(200);
    expect(held.body.map((reply: { error?: unknown }) => reply.error)).toEqual([undefined, undefined]);
    expect((await post(secondUrl, agent.api_key, [poll(10), poll(10)], '10.1.0.3')).status).toBe(200);
  }, 90_000);
});
