import { readFileSync } from 'node:fs';
import { backends } from '@agenthub/testing';
import { startTestHub, type Agent, type TestHub } from './harness.js';

/**
 * The metrics SREs alert on, scraped from a running hub's GET /metrics the way Prometheus does:
 * backlogs read at scrape time (inbox, push agents, webhooks, outbox, event log, tasks by state,
 * embedder queue), waits timed apart from ordinary latency, and the gRPC and Node.js series
 * under the names the stock dashboards query.
 */

/** Parses Prometheus text into `name{labels}` → value. */
async function scrape(hub: TestHub): Promise<Map<string, number>> {
  const response = await fetch(`${hub.url}/metrics`);
  expect(response.status).toBe(200);
  const samples = new Map<string, number>();
  for (const line of (await response.text()).split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    samples.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return samples;
}

/** The metric names of the table under "## Metrics and alerts" in docs/operations.md. */
function documentedMetrics(): string[] {
  const doc = readFileSync(new URL('../../../docs/operations.md', import.meta.url), 'utf8');
  const section = doc.slice(doc.indexOf('\n## Metrics and alerts\n'), doc.indexOf('\n### Dashboard\n'));
  return [...section.matchAll(/^\| `([a-z0-9_]+)` \|/gm)].map((m) => m[1]!);
}

/** Scrapes until `check` holds (backlogs settle asynchronously: the relay, the consumer). */
async function eventually(hub: TestHub, check: (samples: Map<string, number>) => boolean, timeoutMs = 60_000): Promise<Map<string, number>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const samples = await scrape(hub);
    if (check(samples)) return samples;
    if (Date.now() > deadline) return samples;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

describe.each(backends().map((backend) => [backend.name, backend] as const))('metrics on %s', (_name, backend) => {
  let hub: TestHub;
  let sender: Agent;
  let offline: Agent;
  let push: { agent: { id: string } };
  let workspaceId: string;
  let webhookId: string;

  beforeAll(async () => {
    // Nothing answers on port 1: the push agent and the webhook stay behind, as in an outage.
    hub = await startTestHub(backend, {
      HUB_WEBHOOK_ALLOW_PRIVATE: 'true',
      WEBHOOK_RETRY_SCHEDULE_MS: '3600000',
      MESSAGING_PUSH_MAX_BACKOFF_MS: '3600000',
      EMBEDDINGS_THREADS: '1',
      HUB_METRICS: 'true',
      // A blocking send to an agent that never answers returns after this long.
      MESSAGING_BLOCKING_MS: '300',
    });
    sender = await hub.agent('acme', 'sender');
    offline = await hub.agent('acme', 'offline');
    push = await hub.admin('agents.create', { tenant_id: 'acme', name: 'pushed', create_tenant: true, endpoint_url: 'http://127.0.0.1:1/a2a' });
    workspaceId = (await hub.ok(sender.api_key, 'x-hub/workspace.create', { name: 'Observed' })).workspace.id;
    webhookId = (await hub.ok(sender.api_key, 'x-hub/webhooks.create', { workspace_id: workspaceId, url: 'http://127.0.0.1:1/hook' })).webhook.id;
  }, 180_000);

  afterAll(async () => {
    await hub?.stop();
  }, 60_000);

  const send = (to: string, text: string) =>
    hub.ok(sender.api_key, 'SendMessage', { message: { role: 'user', parts: [{ kind: 'text', text }] }, configuration: { agentId: to } });

  it('reports deliveries queued for connected agents, per push agent, and tasks by state', async () => {
    await send(offline.agent_id, 'one');
    await send(offline.agent_id, 'two');
    await send(push.agent.id, 'three');
    const samples = await eventually(hub, (s) => s.get('agenthub_inbox_deliveries_queued') === 2 && s.get(`agenthub_push_deliveries_queued{agent_id="${push.agent.id}"}`) === 1);
    expect(samples.get('agenthub_inbox_deliveries_queued')).toBe(2);
    expect(samples.get('agenthub_inbox_deliveries_queued_oldest_age_seconds')).toBeGreaterThanOrEqual(0);
    expect(samples.get(`agenthub_push_deliveries_queued{agent_id="${push.agent.id}"}`)).toBe(1);
    expect(samples.has(`agenthub_push_deliveries_queued_oldest_age_seconds{agent_id="${push.agent.id}"}`)).toBe(true);
    expect(samples.get('agenthub_tasks{state="submitted"}')).toBe(3);
    expect(samples.get('agenthub_tasks{state="working"}')).toBe(0);
  });

  it('reports webhook deliveries pending per webhook, and the outbox and event log catching up', async () => {
    await hub.ok(sender.api_key, 'x-hub/workspace.secrets.set', { workspace_id: workspaceId, key: 'k', value: 'v' });
    const samples = await eventually(hub, (s) => (s.get(`agenthub_webhook_deliveries_pending{webhook_id="${webhookId}"}`) ?? 0) >= 1);
    expect(samples.get(`agenthub_webhook_deliveries_pending{webhook_id="${webhookId}"}`)).toBeGreaterThanOrEqual(1);
    expect(samples.get(`agenthub_webhook_deliveries_pending_oldest_age_seconds{webhook_id="${webhookId}"}`)).toBeGreaterThanOrEqual(0);
    // Every service's outbox, not only the one just written to: the others may still be relaying
    // the setup's events (workspace, webhook, sends) on a loaded machine.
    const settled = await eventually(
      hub,
      (s) =>
        ['workspace', 'secrets', 'messaging'].every((service) => s.get(`agenthub_outbox_pending{service="${service}"}`) === 0) &&
        s.get('agenthub_event_log_consumer_lag{group="agenthub-events",topic="agenthub.workspace.events"}') === 0,
    );
    for (const service of ['workspace', 'secrets', 'messaging']) {
      expect(settled.get(`agenthub_outbox_pending{service="${service}"}`)).toBe(0);
      expect(settled.get(`agenthub_outbox_pending_oldest_age_seconds{service="${service}"}`)).toBe(0);
    }
    expect([...settled.keys()].filter((key) => key.startsWith('agenthub_event_log_consumer_lag{'))).not.toHaveLength(0);
  });

  it('times long-polls apart from ordinary calls, and exposes the series stock dashboards query', async () => {
    await hub.ok(offline.api_key, 'x-hub/inbox.poll', { wait_ms: 50, max: 1 });
    await hub.ok(sender.api_key, 'x-hub/workspace.list');
    const samples = await scrape(hub);
    expect(samples.get('agenthub_jsonrpc_wait_seconds_count{method="x-hub/inbox.poll"}')).toBe(1);
    expect(samples.has('agenthub_jsonrpc_request_seconds_count{method="x-hub/inbox.poll"}')).toBe(false);
    expect(samples.get('agenthub_jsonrpc_request_seconds_count{method="x-hub/workspace.list"}')).toBeGreaterThanOrEqual(1);
    expect(samples.get('grpc_server_handled_total{grpc_type="unary",grpc_service="agenthub.workspace.v1.WorkspaceService",grpc_method="ListWorkspaces",grpc_code="OK"}')).toBeGreaterThanOrEqual(1);
    expect([...samples.keys()].some((key) => key.startsWith('grpc_server_handling_seconds_bucket{'))).toBe(true);
    expect(samples.has('process_cpu_seconds_total')).toBe(true);
    expect([...samples.keys()].some((key) => key.startsWith('nodejs_eventloop_lag_seconds'))).toBe(true);
    expect(samples.has('agenthub_embedder_queue_depth{model="use-lite-en-0.2.0"}')).toBe(true);
  });

  it('times blocking sends and a stream\'s life as waits, apart from ordinary call latency', async () => {
    const count = (samples: Map<string, number>, histogram: string, method: string) => samples.get(`${histogram}_count{method="${method}"}`) ?? 0;
    const before = await scrape(hub);
    const task = await hub.ok(sender.api_key, 'SendMessage', {
      message: { role: 'user', parts: [{ kind: 'text', text: 'waits' }] },
      configuration: { agentId: offline.agent_id, blocking: true },
    });
    const sent = await scrape(hub);
    expect(count(sent, 'agenthub_jsonrpc_wait_seconds', 'SendMessage') - count(before, 'agenthub_jsonrpc_wait_seconds', 'SendMessage')).toBe(1);
    expect(count(sent, 'agenthub_jsonrpc_request_seconds', 'SendMessage')).toBe(count(before, 'agenthub_jsonrpc_request_seconds', 'SendMessage'));

    // A stream's opening is an ordinary call; its life, timed when it ends (here when its client leaves), a wait.
    const leave = new AbortController();
    const stream = await fetch(`${hub.url}/a2a`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${sender.api_key}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SubscribeToTask', params: { id: task.id } }),
      signal: leave.signal,
    });
    expect(stream.headers.get('content-type')).toMatch(/^text\/event-stream/);
    await stream.body!.getReader().read();
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    leave.abort();
    const streamed = await eventually(hub, (samples) => count(samples, 'agenthub_jsonrpc_wait_seconds', 'SubscribeToTask') === 1);
    expect(count(streamed, 'agenthub_jsonrpc_wait_seconds', 'SubscribeToTask')).toBe(1);
    expect(streamed.get('agenthub_jsonrpc_wait_seconds_sum{method="SubscribeToTask"}')).toBeGreaterThanOrEqual(1);
    expect(count(streamed, 'agenthub_jsonrpc_request_seconds', 'SubscribeToTask')).toBe(1);
    expect(streamed.get('agenthub_jsonrpc_request_seconds_sum{method="SubscribeToTask"}')).toBeLessThan(streamed.get('agenthub_jsonrpc_wait_seconds_sum{method="SubscribeToTask"}')!);
  });

  it('exposes every metric docs/operations.md lists, and every agenthub_ and grpc_ metric it exposes is listed there', async () => {
    const text = await (await fetch(`${hub.url}/metrics`)).text();
    const exposed = [...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!);
    const documented = documentedMetrics();
    expect(documented.length).toBeGreaterThan(25);
    expect(documented.filter((name) => !exposed.includes(name))).toEqual([]);
    expect(exposed.filter((name) => /^(agenthub|grpc)_/.test(name) && !documented.includes(name))).toEqual([]);
  });
});
