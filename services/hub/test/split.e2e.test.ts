import { createServer } from 'node:net';
import pg from 'pg';
import { createClient } from 'redis';
import { backends, freePort } from '@agenthub/testing';
import { startTestHub, type Agent, type RpcReply, type TestHub } from './harness.js';
import { splitMode, startSplitStack, type SplitProcess, type SplitStack } from './split-hub.js';

/**
 * Split mode as operators run it (split-hub.ts): every service its own built `agenthub serve
 * <service>` process, events included, with two workspace and two messaging replicas behind the
 * gateway, over real PostgreSQL and Redis. What is checked here is what only a split deployment
 * shows: the ops endpoints of each process, calls spread over replicas, a replica dying, a replica
 * draining on SIGTERM while a stream and a blocking send are open on it, and clean exits. The
 * end-to-end suites (`*.e2e.test.ts`, through hubModes()) run their own checks in split mode too.
 * Needs real PostgreSQL and Redis; skipped, saying so, without them.
 */

const real = backends().find((backend) => backend.name === 'postgres+redis');
const describeSplit = real ? describe : describe.skip;
if (!real) {
  console.warn('[split.e2e] skipped: real PostgreSQL and Redis are not reachable (see libs/testing/global-setup.js)');
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const text = (t: string) => ({ kind: 'text', text: t });

/** Successful calls this process's gRPC server handled for services whose name matches. */
async function servedCalls(proc: SplitProcess, service: RegExp): Promise<number> {
  const metrics = await (await fetch(`${proc.opsUrl}/metrics`)).text();
  let total = 0;
  for (const line of metrics.split('\n')) {
    const match = /^agenthub_grpc_server_handling_seconds_count\{([^}]*)\} (\d+)/.exec(line);
    if (!match) continue;
    const labels = match[1] ?? '';
    if (service.test(/service="([^"]*)"/.exec(labels)?.[1] ?? '') && labels.includes('code="OK"')) total += Number(match[2]);
  }
  return total;
}

/** One SSE response read event by event (`id:` and the JSON-RPC object of `data:`). */
class SseReader {
  private buffer = '';
  private readonly decoder = new TextDecoder();
  private readonly reader: ReadableStreamDefaultReader<Uint8Array>;
  constructor(response: Response) {
    this.reader = response.body!.getReader();
  }

  /** The next event, or undefined once the server ended the stream. */
  async next(): Promise<{ id?: string; data: any } | undefined> {
    for (;;) {
      const end = this.buffer.indexOf('\n\n');
      if (end >= 0) {
        const lines = this.buffer.slice(0, end).split('\n').filter((l) => !l.startsWith(':'));
        this.buffer = this.buffer.slice(end + 2);
        if (!lines.length) continue;
        const id = lines.find((l) => l.startsWith('id: '))?.slice(4);
        return { ...(id !== undefined ? { id } : {}), data: JSON.parse(lines.filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n')) };
      }
      const { value, done } = await this.reader.read();
      if (done) return undefined;
      this.buffer += this.decoder.decode(value, { stream: true });
    }
  }
}

describeSplit('split mode: one process per service, two workspace and two messaging replicas', () => {
  let hub: TestHub & SplitStack;
  /** Sees who listens on which channel (PUBSUB NUMSUB). */
  let redis: ReturnType<typeof createClient>;
  let nextId = 1;
  const proc = (name: keyof SplitStack['processes']) => hub.processes[name];

  /**
   * Resolves once `listening` says whether a messaging replica listens for `agentId`'s inbox
   * wake-ups (a long-poll of its waits there; the last one's has let go).
   */
  async function inboxListened(agentId: string, listening = true): Promise<void> {
    const channel = `${hub.redisPrefix}messaging:inbox:${agentId}`;
    const deadline = Date.now() + 20_000;
    while (Number((await redis.pubSubNumSub(channel))[channel] ?? 0) > 0 !== listening) {
      if (Date.now() > deadline) throw new Error(`${channel} ${listening ? 'had no listener' : 'kept its listener'} for 20 s`);
      await sleep(20);
    }
  }

  beforeAll(async () => {
    // Connections are not recycled during this suite (the e2e suites run with a short age), so
    // the gateway's round-robin strictly alternates between the two messaging replicas: two
    // consecutive messaging calls land one on each, which the SIGTERM test relies on.
    hub = await startTestHub(splitMode(real!), { GRPC_MAX_CONNECTION_AGE_MS: '3600000' });
    redis = createClient({ url: hub.redisUrl });
    await redis.connect();
  });
  afterAll(async () => {
    await redis?.close();
    await hub?.stop();
  });

  const rpc = (who: Agent, method: string, params: unknown = {}): Promise<RpcReply> => hub.call(who.api_key, method, params, { headers: { 'A2A-Version': '1.0' } });
  const ok = (who: Agent, method: string, params: unknown = {}) => hub.ok(who.api_key, method, params);

  it('serves /healthz, /readyz (with its checks) and /metrics on every service\'s ops port, events included', async () => {
    const services = Object.values(hub.processes).filter((p) => p.name !== 'gateway');
    expect(services.map((p) => p.name).sort()).toEqual(['events', 'identity', 'messaging-a', 'messaging-b', 'secrets', 'workspace-a', 'workspace-b']);
    for (const p of services) {
      expect((await fetch(`${p.opsUrl}/healthz`)).status).toBe(200);
      const ready = await fetch(`${p.opsUrl}/readyz`);
      expect({ name: p.name, status: ready.status, body: await ready.json() }).toEqual({
        name: p.name,
        status: 200,
        body: { ready: true, stopping: false, checks: { grpc: { ok: true }, db: { ok: true }, kv: { ok: true } } },
      });
      const metrics = await fetch(`${p.opsUrl}/metrics`);
      expect(metrics.status).toBe(200);
      expect(metrics.headers.get('content-type')).toContain('text/plain');
      expect(await metrics.text()).toContain('# TYPE agenthub_grpc_server_handling_seconds histogram');
      expect((await fetch(`${p.opsUrl}/nope`)).status).toBe(404);
    }
    expect((await fetch(`${hub.url}/readyz`)).status).toBe(200);
    // The gateway's metrics are on its ops port too, not on the public one an Ingress exposes.
    const gatewayMetrics = await fetch(`${hub.gatewayOpsUrl}/metrics`);
    expect(gatewayMetrics.status).toBe(200);
    expect(await gatewayMetrics.text()).toContain('# TYPE agenthub_http_requests_total counter');
    expect((await fetch(`${hub.url}/metrics`)).status).toBe(404);
  });

  it('answers workspace, member, secret, grant and webhook calls through the gateway, spread over both workspace replicas', async () => {
    const owner = await hub.agent('acme', 'owner');
    const colleague = await hub.agent('acme', 'colleague');
    const foreign = await hub.agent('globex', 'foreign');
    const beforeA = await servedCalls(proc('workspace-a'), /WorkspaceService/);
    const beforeB = await servedCalls(proc('workspace-b'), /WorkspaceService/);

    const { workspace } = await ok(owner, 'x-hub/workspace.create', { name: 'Split' });
    await ok(owner, 'x-hub/workspace.members.add', { workspace_id: workspace.id, agent_id: colleague.agent_id, role: 'write' });
    const { members } = await ok(colleague, 'x-hub/workspace.members.list', { workspace_id: workspace.id });
    expect(members.map((m: { agent_id: string }) => m.agent_id).sort()).toEqual([owner.agent_id, colleague.agent_id].sort());
    for (let i = 0; i < 10; i++) {
      expect(await ok(colleague, 'x-hub/workspace.get', { workspace_id: workspace.id })).toMatchObject({ role: 'write', member_count: 2 });
    }
    await ok(colleague, 'x-hub/workspace.secrets.set', { workspace_id: workspace.id, key: 'DB_PASSWORD', value: 's3cret' });
    expect(await ok(owner, 'x-hub/workspace.secrets.get', { workspace_id: workspace.id, key: 'DB_PASSWORD' })).toMatchObject({ value: 's3cret' });
    // The events process answers through the gateway (EVENTS_ADDR) and asks workspace for roles.
    const { webhook } = await ok(owner, 'x-hub/webhooks.create', { workspace_id: workspace.id, url: 'https://93.184.215.14/hook' });
    expect((await ok(owner, 'x-hub/webhooks.list', { workspace_id: workspace.id })).webhooks.map((w: { id: string }) => w.id)).toEqual([webhook.id]);
    expect((await rpc(colleague, 'x-hub/webhooks.list', { workspace_id: workspace.id })).body.error).toMatchObject({ code: -32102 });

    // Cross-tenant member through an approved grant; revoking it denies the very next call.
    const { grant } = await ok(foreign, 'x-hub/grants.request', { agent_id: owner.agent_id });
    await ok(owner, 'x-hub/grants.approve', { grant_id: grant.id });
    await ok(owner, 'x-hub/workspace.members.add', { workspace_id: workspace.id, agent_id: foreign.agent_id, role: 'read' });
    expect(await ok(foreign, 'x-hub/workspace.get', { workspace_id: workspace.id })).toMatchObject({ role: 'read' });
    await ok(owner, 'x-hub/grants.revoke', { grant_id: grant.id });
    for (let i = 0; i < 4; i++) {
      expect((await rpc(foreign, 'x-hub/workspace.get', { workspace_id: workspace.id })).body.error).toMatchObject({ code: -32100, message: 'Access denied' });
    }

    const servedA = (await servedCalls(proc('workspace-a'), /WorkspaceService/)) - beforeA;
    const servedB = (await servedCalls(proc('workspace-b'), /WorkspaceService/)) - beforeB;
    expect(servedA).toBeGreaterThan(0);
    expect(servedB).toBeGreaterThan(0);
    expect(servedA + servedB).toBeGreaterThanOrEqual(15);
  });

  it('delivers messages across messaging replicas, waking blocking inbox polls', async () => {
    const sender = await hub.agent('acme', 'sender');
    const recipient = await hub.agent('acme', 'recipient');
    const beforeA = await servedCalls(proc('messaging-a'), /MessagingService/);
    const beforeB = await servedCalls(proc('messaging-b'), /MessagingService/);
    for (let i = 0; i < 4; i++) {
      // The recipient waits first (on one replica); the send (on the other) must wake it, well
      // before the poll's own 8 s are up.
      await inboxListened(recipient.agent_id, false);
      const polled = rpc(recipient, 'x-hub/inbox.poll', { wait_ms: 8000 });
      await inboxListened(recipient.agent_id);
      const started = Date.now();
      const sent = await rpc(sender, 'SendMessage', { message: { role: 'user', parts: [text(`hello ${i}`)] }, configuration: { agentId: recipient.agent_id } });
      expect(sent.body.error).toBeUndefined();
      const { result, error } = (await polled).body;
      expect(error).toBeUndefined();
      expect(Date.now() - started).toBeLessThan(5000);
      expect(result.deliveries.map((d: { task_id: string }) => d.task_id)).toEqual([sent.body.result.id]);
      for (const d of result.deliveries as { delivery_id: string }[]) await ok(recipient, 'x-hub/inbox.ack', { delivery_id: d.delivery_id });
      expect((await ok(sender, 'GetTask', { id: sent.body.result.id })).id).toBe(sent.body.result.id);
    }
    expect((await servedCalls(proc('messaging-a'), /MessagingService/)) - beforeA).toBeGreaterThan(0);
    expect((await servedCalls(proc('messaging-b'), /MessagingService/)) - beforeB).toBeGreaterThan(0);
  });

  it('a messaging replica stopped with SIGTERM drains: the blocking send on it completes, its stream resumes on the other replica with Last-Event-ID and misses nothing', async () => {
    const sender = await hub.agent('acme', 'drain-sender');
    const recipient = await hub.agent('acme', 'drain-recipient');
    const send = (word: string, configuration: Record<string, unknown> = {}) =>
      rpc(sender, 'SendMessage', { message: { role: 'user', parts: [text(word)] }, configuration: { agentId: recipient.agent_id, ...configuration } });
    const update = (taskId: string, state: string) => ok(recipient, 'x-hub/tasks.update', { task_id: taskId, state });

    /** What a subscriber sees: `<event id> <state>`, whichever connection brought it. */
    interface Followed {
      seen: string[];
      /** How many times the stream ended before the final event and the client resumed. */
      resumed: number;
      done: Promise<void>;
    }
    const open = (taskId: string, lastEventId?: string) =>
      fetch(`${hub.url}/a2a`, {
        method: 'POST',
        headers: {
          'Content-Type': 'application/json',
          Authorization: `Bearer ${sender.api_key}`,
          Accept: 'text/event-stream',
          ...(lastEventId ? { 'Last-Event-ID': lastEventId } : {}),
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method: 'SubscribeToTask', params: { id: taskId } }),
      });
    /** Subscribes like an SSE client: on an early end (or an error event), reconnects after the last id seen. */
    async function follow(taskId: string): Promise<Followed> {
      const followed: Followed = { seen: [], resumed: 0, done: Promise.resolve() };
      let lastId: string | undefined;
      let sse = new SseReader(await open(taskId));
      const read = async () => {
        const event = await sse.next();
        if (!event || event.data.error) return false;
        const result = event.data.result;
        followed.seen.push(`${event.id} ${result.kind === 'task' ? `task ${result.status.state}` : `${result.status.state}${result.final ? ' final' : ''}`}`);
        lastId = event.id;
        return !result.final;
      };
      // The first event before returning: the gateway has then opened this stream's upstream call.
      if (!(await read())) throw new Error(`the stream of ${taskId} ended at once: ${followed.seen}`);
      followed.done = (async () => {
        for (;;) {
          while (await read());
          if (followed.seen.at(-1)?.endsWith('final')) return;
          followed.resumed += 1;
          sse = new SseReader(await open(taskId, lastId));
        }
      })();
      return followed;
    }

    const first = (await send('watched one')).body.result.id as string;
    const second = (await send('watched two')).body.result.id as string;
    // Two consecutive stream calls: one on each messaging replica (round-robin).
    const streams = [await follow(first), await follow(second)];
    // Two consecutive blocking sends: one on each replica too; they wait for the recipient. No
    // other messaging call may come between them, so their tasks are awaited in the database.
    const blocking = [send('blocking one', { blocking: true }), send('blocking two', { blocking: true })];
    const db = new pg.Client({ connectionString: hub.databaseUrl });
    await db.connect();
    try {
      const count = async () => Number((await db.query('SELECT count(*) AS n FROM messaging.tasks WHERE recipient_agent_id = $1', [recipient.agent_id])).rows[0].n);
      while ((await count()) < 4) await sleep(50);
    } finally {
      await db.end();
    }
    const waiting = new Map<string, string>();
    while (waiting.size < 4) {
      for (const d of (await ok(recipient, 'x-hub/inbox.poll', { wait_ms: 2000 })).deliveries) {
        waiting.set(d.message.parts[0].text, d.task_id);
        await ok(recipient, 'x-hub/inbox.ack', { delivery_id: d.delivery_id });
      }
    }

    const stopping = proc('messaging-a');
    const exited = stopping.stop('SIGTERM');
    // Readiness turns 503 at once, so endpoints drop the replica while it drains.
    while ((await fetch(`${stopping.opsUrl}/readyz`)).status === 200) await sleep(50);
    // Draining: the calls running on the stopping replica go on; new ones go to the other.
    await update(first, 'working');
    await update(second, 'working');
    await update(waiting.get('blocking one')!, 'completed');
    await update(waiting.get('blocking two')!, 'completed');
    for (const reply of await Promise.all(blocking)) {
      expect(reply.body.error).toBeUndefined();
      expect(reply.body.result.status.state).toBe('completed');
    }
    expect(await exited).toEqual({ code: 0, signal: null });

    // Once it is gone, the rest of each task happens on the other replica.
    await update(first, 'completed');
    await update(second, 'completed');
    await Promise.all(streams.map((s) => s.done));
    for (const s of streams) expect(s.seen).toEqual(['1 task submitted', '2 working', '3 completed final']);
    // The stream that was on the stopped replica ended early and was resumed; the other was not.
    expect(streams.map((s) => s.resumed).sort()).toEqual([0, 1]);

    // Every messaging call now goes to the remaining replica.
    const after = await send('after');
    expect(after.body.result.status.state).toBe('submitted');
    expect((await ok(sender, 'GetTask', { id: after.body.result.id })).id).toBe(after.body.result.id);
  });

  it('keeps answering when a workspace replica dies', async () => {
    const owner = await hub.agent('acme', 'survivor');
    const { workspace } = await ok(owner, 'x-hub/workspace.create', { name: 'Before' });
    expect(await proc('workspace-a').stop('SIGKILL')).toEqual({ code: null, signal: 'SIGKILL' });
    const before = await servedCalls(proc('workspace-b'), /WorkspaceService/);
    for (let i = 0; i < 8; i++) {
      expect(await ok(owner, 'x-hub/workspace.get', { workspace_id: workspace.id })).toMatchObject({ role: 'admin' });
    }
    const created = await ok(owner, 'x-hub/workspace.create', { name: 'After' });
    await ok(owner, 'x-hub/workspace.secrets.set', { workspace_id: created.workspace.id, key: 'K', value: 'v' });
    expect(await ok(owner, 'x-hub/workspace.secrets.get', { workspace_id: created.workspace.id, key: 'K' })).toMatchObject({ value: 'v' });
    expect((await servedCalls(proc('workspace-b'), /WorkspaceService/)) - before).toBeGreaterThanOrEqual(9);
  });

  it('stops every remaining process with exit status 0 on SIGTERM', async () => {
    await expect(hub.stop()).resolves.toBeUndefined();
    for (const p of Object.values(hub.processes)) {
      const exit = await p.exited;
      const expected = p.name === 'workspace-a' ? { code: null, signal: 'SIGKILL' } : { code: 0, signal: null };
      expect({ name: p.name, ...exit }).toEqual({ name: p.name, ...expected });
    }
  });
});

describeSplit('the split stack of the test harness', () => {
  // A CI run failed when the gateway found its port taken: the stack chooses free ports, but a
  // process binds its port only once it has loaded, seconds later.
  it('starts on fresh ports when one it chose is taken before its process binds it', async () => {
    // It only holds the port: a connection to it is closed at once, since a socket nobody reads
    // never sees its peer's FIN and would stay open in this worker after the test.
    const holder = createServer((socket) => socket.destroy());
    const held = await freePort();
    await new Promise<void>((resolve) => holder.listen(held, '127.0.0.1', resolve));
    let chosen = 0;
    // The fifteenth port is the gateway's (HUB_PORT): hand it the held one, once.
    const choosePort = () => (++chosen === 15 ? Promise.resolve(held) : freePort());
    const provisioned = await real!.provision();
    try {
      const stack = await startSplitStack(provisioned, {}, choosePort);
      try {
        expect(stack.url).not.toBe(`http://127.0.0.1:${held}`);
        expect((await fetch(`${stack.url}/readyz`)).status).toBe(200);
      } finally {
        await stack.stop();
      }
      expect(chosen).toBe(32);
    } finally {
      holder.close();
      await provisioned.dispose();
    }
  });
});
