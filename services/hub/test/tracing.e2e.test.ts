import { Writable } from 'node:stream';
import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { createLogger, loadConfig, startTracing, withSpan } from '@agenthub/runtime';
import { backends } from '@agenthub/testing';
import { startEchoAgent, type EchoAgent } from '../../messaging/test/echo-agent.js';
import { startTestHub, type Agent, type TestHub } from './harness.js';
import { WebhookReceiver } from './webhook-receiver.js';

/**
 * Tracing end to end on the all-in-one hub (every service in this process, so one in-memory
 * exporter sees all their spans): a JSON-RPC call is one trace through the gateway, gRPC, the
 * services, the database and Redis, continued through the delivery rows, the outbox and the event log
 * into the push worker and the webhook worker, whose receivers get the same trace's traceparent.
 */

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$/;
const exporter = new InMemorySpanExporter();
let stopTracing: () => Promise<void>;

beforeAll(async () => {
  stopTracing = await startTracing(loadConfig({}), { serviceName: 'agenthub-test', exporter, immediate: true });
});
afterAll(async () => {
  await stopTracing();
});

/** Polls until `check` returns something, for at most `timeoutMs`. */
async function until<T>(what: string, check: () => T | undefined, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = check();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

const spansOf = (traceId: string) => exporter.getFinishedSpans().filter((span) => span.spanContext().traceId === traceId);

/** The gateway's span of the last `method` call. */
const gatewaySpan = (method: string) =>
  until(`the span of ${method}`, () => exporter.getFinishedSpans().filter((s) => s.name === `jsonrpc ${method}` && s.kind === SpanKind.SERVER).at(-1));

/** Every span of the trace hangs, through its parents, under the one root: the gateway's span. */
function expectConnected(spans: ReadableSpan[], root: ReadableSpan) {
  const ids = new Set(spans.map((s) => s.spanContext().spanId));
  for (const span of spans) {
    if (span === root) expect(span.parentSpanContext).toBeUndefined();
    else expect({ span: span.name, parentKnown: ids.has(span.parentSpanContext?.spanId ?? '') }).toEqual({ span: span.name, parentKnown: true });
  }
}

describe.each(backends().map((b) => [b.name, b] as const))('tracing (%s)', (_name, backend) => {
  let hub: TestHub;
  let remote: EchoAgent;
  let receiver: WebhookReceiver;
  let sender: Agent;
  let pushAgentId: string;

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    hub = await startTestHub(backend, { HUB_EGRESS_ALLOW_PRIVATE: 'true', MESSAGING_BLOCKING_MS: '10000', EMBEDDINGS_THREADS: '1' });
    remote = await startEchoAgent('echo');
    pushAgentId = (await hub.admin('agents.create', { tenant_id: 'acme', name: 'echo', create_tenant: true, endpoint_url: remote.url })).agent.id;
    sender = await hub.agent('acme', 'sender');
  });
  afterAll(async () => {
    await remote?.stop();
    await hub?.stop();
    await receiver?.close();
  });

  it('a send to a push agent is one trace from the JSON-RPC call to the agent, which receives its traceparent', async () => {
    const sentBefore = remote.traceparents.length;
    const reply = await hub.call(sender.api_key, 'SendMessage', {
      message: { role: 'user', parts: [{ kind: 'text', text: 'traced' }] },
      configuration: { agentId: pushAgentId, blocking: true },
    }, { headers: { 'A2A-Version': '1.0' } });
    expect(reply.body.error).toBeUndefined();
    const root = await gatewaySpan('SendMessage');
    const traceId = root.spanContext().traceId;

    // The agent's first request after the send (SendMessage) carries the trace, parented by the push worker's span.
    const sent = remote.traceparents.slice(sentBefore).find((header) => header !== '');
    expect(sent).toMatch(TRACEPARENT);
    const [, sentTrace, sentParent] = TRACEPARENT.exec(sent!)!;
    expect(sentTrace).toBe(traceId);
    const push = await until('the push delivery span', () => spansOf(traceId).find((s) => s.name === 'push delivery'));
    expect(push.spanContext().spanId).toBe(sentParent);

    const spans = spansOf(traceId);
    expect(spans.some((s) => s.kind === SpanKind.CLIENT && s.attributes['rpc.system'] === 'grpc')).toBe(true);
    expect(spans.some((s) => s.kind === SpanKind.SERVER && s.attributes['rpc.method'] === 'SendMessage' && s.attributes['rpc.system'] === 'grpc')).toBe(true);
    expect(spans.some((s) => s.attributes['db.system.name'] === 'postgresql')).toBe(true);
    if (backend.name === 'postgres+redis') expect(spans.some((s) => s.attributes['db.system.name'] === 'redis')).toBe(true);
    expectConnected(spans, root);
  });

  it('a workspace change reaches a webhook receiver as part of the trace of the call that made it', async () => {
    const call = (method: string, params: unknown) => hub.ok(sender.api_key, `x-hub/${method}`, params);
    const { workspace } = await call('workspace.create', { name: 'Traced' });
    const member = await hub.agent('acme', 'member');
    await call('webhooks.create', { workspace_id: workspace.id, url: receiver.url('/traced'), events: ['workspace.member.added'] });

    await call('workspace.members.add', { workspace_id: workspace.id, agent_id: member.agent_id, role: 'read' });
    const root = await gatewaySpan('x-hub/workspace.members.add');
    const traceId = root.spanContext().traceId;

    const [delivered] = await receiver.waitFor('the webhook request', () => receiver.on('/traced').length > 0 && receiver.on('/traced'));
    expect(delivered!.body.event).toBe('workspace.member.added');
    expect(delivered!.headers.traceparent).toMatch(TRACEPARENT);
    const [, sentTrace, sentParent] = TRACEPARENT.exec(delivered!.headers.traceparent!)!;
    expect(sentTrace).toBe(traceId);
    const delivery = await until('the webhook delivery span', () => spansOf(traceId).find((s) => s.name === 'webhook delivery'));
    expect(delivery.spanContext().spanId).toBe(sentParent);
    expect(delivery.attributes).toMatchObject({ 'http.request.method': 'POST', 'server.address': '127.0.0.1', 'http.response.status_code': 204 });
    expect(delivery.attributes['url.full']).toBeUndefined();
    // The hop over the event log: the relay's publish of the event (producer), the events
    // service's intake of it (consumer), parent of the delivery.
    const intake = spansOf(traceId).find((s) => s.name === 'event intake' && s.kind === SpanKind.CONSUMER);
    expect(delivery.parentSpanContext?.spanId).toBe(intake?.spanContext().spanId);
    const publish = spansOf(traceId).find((s) => s.spanContext().spanId === intake?.parentSpanContext?.spanId);
    expect(publish).toMatchObject({ name: 'publish agenthub.workspace.events', kind: SpanKind.PRODUCER });
    expect(publish!.attributes).toMatchObject({ 'messaging.operation.type': 'send', 'messaging.destination.name': 'agenthub.workspace.events' });
    expectConnected(spansOf(traceId), root);
  });

  it("a caller's traceparent makes the call part of the caller's trace", async () => {
    const callerTrace = '4bf92f3577b34da6a3ce929d0e0e4736';
    const callerSpan = '00f067aa0ba902b7';
    const reply = await hub.call(sender.api_key, 'x-hub/workspace.list', {}, { headers: { traceparent: `00-${callerTrace}-${callerSpan}-01` } });
    expect(reply.body.error).toBeUndefined();
    const root = await gatewaySpan('x-hub/workspace.list');
    expect(root.spanContext().traceId).toBe(callerTrace);
    expect(root.parentSpanContext?.spanId).toBe(callerSpan);
  });

  it('log lines written during a traced call carry its trace_id', async () => {
    const lines: string[] = [];
    const log = createLogger({ level: 'info', destination: new Writable({ write: (chunk, _enc, done) => (lines.push(String(chunk)), done()) }) });
    let traceId = '';
    await withSpan('work', {}, async (span) => {
      traceId = span!.spanContext().traceId;
      log.info('inside');
    });
    log.info('outside');
    const [inside, outside] = lines.map((line) => JSON.parse(line));
    expect(inside).toMatchObject({ msg: 'inside', trace_id: traceId });
    expect(outside.trace_id).toBeUndefined();
  });
});
