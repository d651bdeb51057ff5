import { hubModes, startTestHub, type Agent, type TestHub } from './harness.js';

/**
 * Streams over real HTTP (Server-Sent Events, one JSON-RPC response object per `data:` line):
 * SendStreamingMessage and SubscribeToTask follow a task to its end, a reconnect with the last
 * event id loses no transition, and a connected agent receives its deliveries on
 * `x-hub/inbox.stream`. Refusals come back as ordinary JSON-RPC errors.
 */

interface SseEvent {
  id?: string;
  data: any;
}

/** An open SSE response: events are read one at a time; `close` hangs up. */
class SseReader {
  private buffer = '';
  private readonly decoder = new TextDecoder();
  private reader?: ReadableStreamDefaultReader<Uint8Array>;
  constructor(readonly response: Response, private readonly controller: AbortController) {}

  /** The next event, or undefined when the server ended the stream. */
  async next(): Promise<SseEvent | undefined> {
    for (;;) {
      const end = this.buffer.indexOf('\n\n');
      if (end >= 0) {
        const block = this.buffer.slice(0, end);
        this.buffer = this.buffer.slice(end + 2);
        const lines = block.split('\n').filter((l) => !l.startsWith(':'));
        if (!lines.length) continue;
        const id = lines.find((l) => l.startsWith('id: '))?.slice(4);
        const data = lines.filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
        return { ...(id !== undefined ? { id } : {}), data: JSON.parse(data) };
      }
      this.reader ??= this.response.body!.getReader();
      const { value, done } = await this.reader.read();
      if (done) return undefined;
      this.buffer += this.decoder.decode(value, { stream: true });
    }
  }

  /** Every remaining event until the server ends the stream. */
  async rest(): Promise<SseEvent[]> {
    const events: SseEvent[] = [];
    for (let e = await this.next(); e; e = await this.next()) events.push(e);
    return events;
  }

  close() {
    this.controller.abort();
  }
}

describe.each(hubModes().map((m) => [m.name, m] as const))('streams over HTTP (%s)', (_name, backend) => {
  let hub: TestHub;
  let sender: Agent;
  let recipient: Agent;
  let stranger: Agent;
  let nextId = 1;

  beforeAll(async () => {
    hub = await startTestHub(backend);
    sender = await hub.agent('acme', 'sender');
    recipient = await hub.agent('acme', 'recipient');
    stranger = await hub.agent('acme', 'stranger');
  });
  afterAll(() => hub?.stop());

  async function open(who: Agent, method: string, params: unknown, headers: Record<string, string> = {}) {
    const controller = new AbortController();
    const id = nextId++;
    const response = await fetch(`${hub.url}/a2a`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${who.api_key}`, Accept: 'text/event-stream', ...headers },
      body: JSON.stringify({ jsonrpc: '2.0', id, method, params }),
      signal: controller.signal,
    });
    return { id, response, sse: new SseReader(response, controller) };
  }

  const text = (t: string) => ({ kind: 'text', text: t });
  const update = (params: Record<string, unknown>) => hub.ok(recipient.api_key, 'x-hub/tasks.update', params);

  /** Summaries that name what a user watching the stream sees. */
  const seen = (events: SseEvent[]) =>
    events.map(({ id, data }) => {
      const r = data.result;
      if (r.kind === 'task') return `${id} task ${r.status.state}`;
      if (r.kind === 'artifact-update') return `${id} artifact ${r.artifact.parts[0].text}`;
      return `${id} ${r.status.state}${r.final ? ' final' : ''}`;
    });

  it('SendStreamingMessage: the task first, then each transition and artifact, closing at the terminal state', async () => {
    const { id, response, sse } = await open(sender, 'SendStreamingMessage', {
      message: { role: 'user', parts: [text('stream me')] },
      configuration: { agentId: recipient.agent_id },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const first = (await sse.next())!;
    expect(first.data).toMatchObject({ jsonrpc: '2.0', id, result: { kind: 'task', status: { state: 'submitted' } } });
    const taskId = first.data.result.id;
    expect(first.data.result.messages[0].parts).toEqual([text('stream me')]);

    await update({ task_id: taskId, state: 'working' });
    await update({
      task_id: taskId,
      state: 'completed',
      message: { role: 'agent', parts: [text('all done')] },
      artifacts: [{ name: 'answer', mimeType: 'text/plain', parts: [text('42')] }],
    });
    const rest = await sse.rest();
    expect(seen([first, ...rest])).toEqual(['1 task submitted', '2 working', '3.0 artifact 42', '3 completed final']);
    const final = rest.at(-1)!.data.result;
    expect(final).toMatchObject({ taskId, contextId: first.data.result.contextId, status: { message: { role: 'agent', parts: [text('all done')] } } });
    expect(Date.parse(final.status.timestamp)).not.toBeNaN();
  });

  it('SubscribeToTask resumes after the Last-Event-ID it saw without losing a transition', async () => {
    const task = await hub.ok(sender.api_key, 'SendMessage', { message: { role: 'user', parts: [text('resume')] }, configuration: { agentId: recipient.agent_id } });
    const watching = await open(sender, 'SubscribeToTask', { id: task.id });
    const first = (await watching.sse.next())!;
    expect(seen([first])).toEqual(['1 task submitted']);
    watching.sse.close();

    // Changes while the subscriber is away.
    await update({ task_id: task.id, state: 'working', artifacts: [{ parts: [text('part one')] }] });
    await update({ task_id: task.id, state: 'input-required', message: { role: 'agent', parts: [text('which one?')] } });

    const resumed = await open(sender, 'SubscribeToTask', { id: task.id }, { 'Last-Event-ID': first.id! });
    expect(seen([(await resumed.sse.next())!, (await resumed.sse.next())!, (await resumed.sse.next())!])).toEqual([
      '2.0 artifact part one',
      '2 working',
      '3 input-required',
    ]);
    await hub.ok(sender.api_key, 'CancelTask', { id: task.id });
    expect(seen(await resumed.sse.rest())).toEqual(['4 canceled final']);

    // Resuming mid-version (after an artifact id) repeats that version rather than skipping it.
    const again = await open(sender, 'SubscribeToTask', { id: task.id }, { 'Last-Event-ID': '2.0' });
    expect(seen(await again.sse.rest())).toEqual(['2.0 artifact part one', '2 working', '3 input-required', '4 canceled final']);
  });

  it('x-hub/inbox.stream hands a connected agent its deliveries in order as they are sent', async () => {
    const listener = await hub.agent('acme', 'listener');
    const inbox = await open(listener, 'x-hub/inbox.stream', {});
    expect(inbox.response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const sent = [];
    for (const word of ['one', 'two', 'three']) {
      sent.push((await hub.ok(sender.api_key, 'SendMessage', { message: { role: 'user', parts: [text(word)] }, configuration: { agentId: listener.agent_id } })).id);
    }
    const got = [(await inbox.sse.next())!, (await inbox.sse.next())!, (await inbox.sse.next())!];
    expect(got.map((e) => [e.data.result.kind, e.data.result.task_id, e.data.result.message.parts[0].text])).toEqual([
      ['delivery', sent[0], 'one'],
      ['delivery', sent[1], 'two'],
      ['delivery', sent[2], 'three'],
    ]);
    expect(got.map((e) => e.id)).toEqual(got.map((e) => e.data.result.delivery_id));
    for (const e of got) expect(await hub.ok(listener.api_key, 'x-hub/inbox.ack', { delivery_id: e.id })).toEqual({ acked: true });
    inbox.sse.close();
  });

  it('refusals are ordinary JSON-RPC errors: unknown or foreign task, bad params, bad Last-Event-ID, a stream in a batch', async () => {
    const task = await hub.ok(sender.api_key, 'SendMessage', { message: { role: 'user', parts: [text('mine')] }, configuration: { agentId: recipient.agent_id } });
    for (const [who, params, headers, code] of [
      [stranger, { id: task.id }, {}, -32001],
      [sender, { id: 'task_missing' }, {}, -32001],
      [sender, {}, {}, -32602],
      [sender, { id: task.id }, { 'Last-Event-ID': 'yesterday' }, -32602],
    ] as const) {
      const { response } = await open(who, 'SubscribeToTask', params, headers);
      expect(response.headers.get('content-type')).toMatch(/^application\/json/);
      expect(((await response.json()) as any).error.code).toBe(code);
    }
    const badPart = await open(sender, 'SendStreamingMessage', { message: { role: 'user', parts: [{ kind: 'file', mimeType: 'image/png' }] }, configuration: { agentId: recipient.agent_id } });
    const error = ((await badPart.response.json()) as any).error;
    expect(error.code).toBe(-32602);
    expect(error.message).toContain('message.parts[0].data');

    const batch = await fetch(`${hub.url}/a2a`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${sender.api_key}` },
      body: JSON.stringify([{ jsonrpc: '2.0', id: 1, method: 'SubscribeToTask', params: { id: task.id } }, { jsonrpc: '2.0', id: 2, method: 'GetTask', params: { id: task.id } }]),
    });
    const replies = (await batch.json()) as any[];
    expect(replies.find((r) => r.id === 1).error.code).toBe(-32600);
    expect(replies.find((r) => r.id === 2).result.id).toBe(task.id);
  });

  it('ListTasks pages through the caller\'s tasks', async () => {
    const lister = await hub.agent('acme', 'lister');
    const ids = [];
    for (let i = 0; i < 3; i += 1) {
      ids.push((await hub.ok(lister.api_key, 'SendMessage', { message: { role: 'user', parts: [text(`t${i}`)] }, configuration: { agentId: recipient.agent_id, contextId: 'ctx-list' } })).id);
    }
    const page = await hub.ok(lister.api_key, 'ListTasks', { contextId: 'ctx-list', pageSize: 2 });
    expect(page.totalSize).toBe(3);
    expect(page.tasks).toHaveLength(2);
    const next = await hub.ok(lister.api_key, 'ListTasks', { contextId: 'ctx-list', pageSize: 2, pageToken: page.nextPageToken });
    expect([...page.tasks, ...next.tasks].map((t: any) => t.id).sort()).toEqual([...ids].sort());
    expect(next.nextPageToken).toBe('');
    const bad = await hub.call(lister.api_key, 'ListTasks', { status: 'done' });
    expect(bad.body.error).toMatchObject({ code: -32602, data: { field: 'status' } });
  });
});
