import { backends } from '@agenthub/testing';
import { startTestHub, type Agent, type TestHub } from './harness.js';

/**
 * Regression (found with @agenthub/client's serve(), whose reconnects left streams behind): a
 * client that hangs up on `x-hub/inbox.stream` must end the stream on the hub too. Before, the
 * gateway waited for the request's 'close', which Node emits once the body is read, not when the
 * client leaves; the orphaned stream went on long-polling and claimed the agent's next delivery,
 * so the agent's new connection did not see it until the claim expired.
 *
 * And streams the hub ends: after HUB_STREAM_MAX_MS (30 minutes by default, 2 s here) a stream
 * closes cleanly, and the client reconnects with the last event id (README "Streams").
 */
/** HUB_STREAM_MAX_MS of this suite's hub: short, so the cap's clean end is seen (README "Streams"). */
const STREAM_MAX_MS = 2_000;

interface SseEvent {
  id?: string;
  data: { result?: any; error?: unknown };
}

/** Every event of a whole SSE body (comment lines, the keep-alives, left out). */
function sseEvents(body: string): SseEvent[] {
  return body
    .split('\n\n')
    .map((block) => block.split('\n').filter((l) => l && !l.startsWith(':')))
    .filter((lines) => lines.length)
    .map((lines) => {
      const id = lines.find((l) => l.startsWith('id: '))?.slice(4);
      const data = lines.filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
      return { ...(id !== undefined ? { id } : {}), data: JSON.parse(data) };
    });
}

describe.each(backends().map((b) => [b.name, b] as const))('streams that end (%s)', (_name, backend) => {
  let hub: TestHub;
  let sender: Agent;
  let recipient: Agent;

  /** A stream read to its end, with how long the hub kept it open. */
  const stream = async (key: string, method: string, params: unknown, headers: Record<string, string> = {}) => {
    const started = Date.now();
    const response = await fetch(`${hub.url}/a2a`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', ...headers },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const events = sseEvents(await response.text());
    return { events, openMs: Date.now() - started };
  };

  beforeAll(async () => {
    hub = await startTestHub(backend, { HUB_STREAM_MAX_MS: String(STREAM_MAX_MS) });
    sender = await hub.agent('disconnect-acme', 'sender');
    recipient = await hub.agent('disconnect-acme', 'recipient');
  });
  afterAll(() => hub?.stop());

  it('ends on the hub: the next delivery goes to the agent\'s new poll, not to the closed stream', async () => {
    const left = new AbortController();
    const response = await fetch(`${hub.url}/a2a`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${recipient.api_key}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'x-hub/inbox.stream', params: {} }),
      signal: left.signal,
    });
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    left.abort();

    const task = await hub.ok(sender.api_key, 'SendMessage', {
      message: { role: 'user', parts: [{ kind: 'text', text: 'are you there?' }] },
      configuration: { agentId: recipient.agent_id },
    });
    const { deliveries } = await hub.ok(recipient.api_key, 'x-hub/inbox.poll', { wait_ms: 10_000 });
    expect(deliveries.map((d: { task_id: string }) => d.task_id)).toEqual([task.id]);
    await hub.ok(recipient.api_key, 'x-hub/inbox.ack', { delivery_id: deliveries[0].delivery_id });
  });

  it('closes streams cleanly after HUB_STREAM_MAX_MS; a task stream resumed with Last-Event-ID misses nothing', async () => {
    // A task stream and an inbox stream, each ended by the cap, not by the task or the client.
    const [sent, inbox] = await Promise.all([
      stream(sender.api_key, 'SendStreamingMessage', {
        message: { role: 'user', parts: [{ kind: 'text', text: 'still there in a while?' }] },
        configuration: { agentId: recipient.agent_id },
      }),
      stream(recipient.api_key, 'x-hub/inbox.stream', {}),
    ]);
    for (const ended of [sent, inbox]) {
      expect(ended.openMs).toBeGreaterThanOrEqual(STREAM_MAX_MS);
      // Ended by the cap, well before anything else would end it (the inbox stream's 25 s polls).
      expect(ended.openMs).toBeLessThan(STREAM_MAX_MS + 15_000);
      expect(ended.events.filter((e) => e.data.error !== undefined)).toEqual([]);
    }
    expect(sent.events.map((e) => e.data.result.kind)).toEqual(['task']);
    const task = sent.events[0]!.data.result;
    expect(task.status.state).toBe('submitted');
    expect(inbox.events.map((e) => e.data.result)).toEqual([expect.objectContaining({ kind: 'delivery', task_id: task.id })]);

    // What happened while no stream was open comes on the resumed one, which ends after the final update.
    await hub.ok(recipient.api_key, 'x-hub/tasks.update', { task_id: task.id, state: 'working' });
    await hub.ok(recipient.api_key, 'x-hub/tasks.update', { task_id: task.id, state: 'completed' });
    const resumed = await stream(sender.api_key, 'SubscribeToTask', { id: task.id }, { 'Last-Event-ID': sent.events[0]!.id! });
    expect(resumed.events.map((e) => `${e.data.result.kind}:${e.data.result.status?.state}:${e.data.result.final}`)).toEqual([
      'status-update:working:false',
      'status-update:completed:true',
    ]);
  });
});
