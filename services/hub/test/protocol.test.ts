import { backends } from '@agenthub/testing';
import { startTestHub, type Agent, type TestHub } from './harness.js';

describe.each(backends().map((b) => [b.name, b] as const))('HTTP JSON-RPC protocol (%s)', (_name, backend) => {
  let hub: TestHub;
  let alice: Agent;

  beforeAll(async () => {
    hub = await startTestHub(backend, { HUB_MAX_BODY_BYTES: '4096', HUB_MAX_BATCH: '5' });
    alice = await hub.agent('acme', 'alice');
  });
  afterAll(() => hub?.stop());

  const post = (body: string, headers: Record<string, string> = {}, path = '/a2a') =>
    fetch(`${hub.url}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body });

  describe('authentication', () => {
    it('answers a call without a key with HTTP 401 and a JSON-RPC error echoing the id', async () => {
      const reply = await hub.call(undefined, 'x-hub/workspace.list');
      expect(reply.status).toBe(401);
      // The README's error table: `Unauthorized: Missing or invalid API key`, with `WWW-Authenticate: Bearer`.
      expect(reply.body).toMatchObject({ jsonrpc: '2.0', error: { code: -32000, message: 'Unauthorized: Missing or invalid API key' } });
      expect(reply.body.id).toEqual(expect.any(Number));
    });

    it('refuses malformed and unknown keys alike', async () => {
      for (const key of ['nope', `ahk_${'A'.repeat(43)}`, `${alice.api_key}x`]) {
        const reply = await hub.call(key, 'x-hub/workspace.list');
        expect(reply.status).toBe(401);
        expect(reply.body.error?.code).toBe(-32000);
      }
    });

    it('refuses a revoked key on the very next call, while the agent’s other keys still work', async () => {
      const bob = await hub.agent('acme', 'bob');
      const second = await hub.admin('keys.create', { agent_id: bob.agent_id });
      expect((await hub.call(bob.api_key, 'x-hub/workspace.list')).status).toBe(200);
      await hub.admin('keys.revoke', { key_id: bob.key_id });
      expect((await hub.call(bob.api_key, 'x-hub/workspace.list')).status).toBe(401);
      expect((await hub.call(second.api_key, 'x-hub/workspace.list')).status).toBe(200);
    });

    it('keeps the operator endpoint for the operator token', async () => {
      const reply = await hub.call(alice.api_key, 'tenants.list', {}, { path: '/admin' });
      expect(reply.status).toBe(401);
      expect((await hub.call(hub.adminToken, 'x-hub/workspace.list')).status).toBe(401);
    });

    it('never returns API keys from listings', async () => {
      const { keys } = await hub.admin('keys.list', { agent_id: alice.agent_id });
      expect(JSON.stringify(keys)).not.toContain(alice.api_key);
      expect(keys[0].prefix.length).toBeLessThan(alice.api_key.length);
    });
  });

  describe('envelope', () => {
    const auth = () => ({ Authorization: `Bearer ${alice.api_key}` });

    it('answers unparseable JSON with -32700', async () => {
      const response = await post('{"jsonrpc": "2.0", ', auth());
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual({ jsonrpc: '2.0', id: null, error: { code: -32700, message: expect.stringMatching(/^Parse error: \S/) } });
    });

    it('answers a non-request with -32600 and an unknown method with -32601', async () => {
      expect(await (await post('{"id": 1}', auth())).json()).toMatchObject({ error: { code: -32600, message: expect.stringMatching(/^Invalid Request: \S/) } });
      const unknown = await hub.call(alice.api_key, 'x-hub/workspace.nope');
      expect(unknown.body.error).toEqual({ code: -32601, message: 'Method not found: x-hub/workspace.nope' });
    });

    it('answers a batch in order and a notification with 204', async () => {
      const batch = [
        { jsonrpc: '2.0', id: 'a', method: 'x-hub/workspace.types' },
        { jsonrpc: '2.0', method: 'x-hub/workspace.types' },
        { jsonrpc: '2.0', id: 'b', method: 'x-hub/workspace.nope' },
      ];
      const replies = (await (await post(JSON.stringify(batch), auth())).json()) as { id: string; error?: { code: number } }[];
      expect(replies.map((r) => r.id)).toEqual(['a', 'b']);
      expect(replies[1]!.error?.code).toBe(-32601);
      const notification = await post(JSON.stringify({ jsonrpc: '2.0', method: 'x-hub/workspace.types' }), auth());
      expect(notification.status).toBe(204);
    });

    it('limits batch size and body size with documented errors', async () => {
      const tooMany = Array.from({ length: 6 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'x-hub/workspace.types' }));
      expect(await (await post(JSON.stringify(tooMany), auth())).json()).toMatchObject({ error: { code: -32600, message: expect.stringMatching(/^Invalid Request: .*at most 5/) } });
      const huge = await post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'x-hub/workspace.create', params: { name: 'x'.repeat(5000) } }), auth());
      expect(huge.status).toBe(413);
      expect(await huge.json()).toMatchObject({ error: { code: -32600, message: expect.stringMatching(/^Invalid Request: .*4096 bytes/) } });
    });

    it('accepts A2A-Version 1.0 or none, and refuses others with -32009', async () => {
      expect((await hub.call(alice.api_key, 'x-hub/workspace.types', {}, { headers: { 'A2A-Version': '1.0' } })).body.result.types).toContain('fact');
      const other = await hub.call(alice.api_key, 'x-hub/workspace.types', {}, { headers: { 'A2A-Version': '0.2' } });
      expect(other.body.error).toMatchObject({ code: -32009, message: 'A2A version 0.2 is not supported; use 1.0' });
    });

    it('answers the per-agent endpoint with the same methods', async () => {
      const reply = await hub.call(alice.api_key, 'x-hub/workspace.types', {}, { path: `/agents/${alice.agent_id}/a2a` });
      expect(reply.body.result.types).toContain('fact');
    });

    it('requires POST on JSON-RPC paths and 404s elsewhere', async () => {
      const get = await fetch(`${hub.url}/a2a`);
      expect(get.status).toBe(405);
      expect(get.headers.get('allow')).toBe('POST');
      expect((await fetch(`${hub.url}/nowhere`)).status).toBe(404);
    });
  });

  describe('operations', () => {
    it('serves health, readiness and Prometheus metrics', async () => {
      expect(await (await fetch(`${hub.url}/healthz`)).json()).toEqual({ status: 'ok' });
      const ready = await fetch(`${hub.url}/readyz`);
      expect(ready.status).toBe(200);
      const readiness = (await ready.json()) as { status: string; checks: Record<string, string> };
      expect(readiness.status).toBe('ready');
      expect(Object.keys(readiness.checks)).toEqual(expect.arrayContaining(['identity', 'workspace', 'secrets', 'kv']));
      expect(Object.values(readiness.checks).every((check) => check === 'serving')).toBe(true);
      const metrics = await (await fetch(`${hub.url}/metrics`)).text();
      expect(metrics).toContain('agenthub_jsonrpc_requests_total{method="x-hub/workspace.types",code="0"}');
      expect(metrics).toContain('agenthub_grpc_server_handling_seconds');
    });

    it('labels unknown methods as such in metrics, so callers cannot grow label sets', async () => {
      await hub.call(alice.api_key, `x-hub/random.${Date.now()}`);
      const metrics = await (await fetch(`${hub.url}/metrics`)).text();
      expect(metrics).toContain('method="unknown"');
      expect(metrics).not.toContain('x-hub/random.');
    });
  });
});
