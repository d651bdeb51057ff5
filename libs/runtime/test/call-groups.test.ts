import { randomBytes } from 'node:crypto';
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import * as grpc from '@grpc/grpc-js';
import { messagingv1 } from '@agenthub/proto';
import { createClient, groupedHandler, GrpcServer, HubError, InternalKey, MAX_GROUPED_CALLS, methodDefinition, Metrics, Reason, type CallContext, type ClientOf } from '@agenthub/runtime';
import { forgeSignature, testLogger, type ForgedPrincipal } from '@agenthub/testing';

/**
 * Calls grouped into a twin (SendMessages for SendMessage) over real gRPC: each call of a group is
 * answered, refused and trusted as it would be alone. The service's own work is played by a
 * handler that records who sent what; the RPC layer, signatures and wire are the project's.
 */

const KEY = randomBytes(32).toString('base64');
const internalKey = InternalKey.fromBase64(KEY);
const SEND = `/${messagingv1.MessagingService.typeName}/SendMessage`;
const alice = { kind: 'agent', agentId: 'alice', tenantId: 'acme' } as const;
const bob = { kind: 'agent', agentId: 'bob', tenantId: 'acme' } as const;

type Messaging = ClientOf<typeof messagingv1.MessagingService>;

/** A messaging server whose SendMessage records (message id → principal) and answers a task named by the message id. */
async function serve() {
  const seen = new Map<string, CallContext['principal']>();
  /** Message ids of the calls the server has begun, before they pass the gate. */
  const arrived = new Set<string>();
  let gate: Promise<void> = Promise.resolve();
  const metrics = new Metrics();
  const handlers = new Proxy(
    {
      sendMessage: async (request: messagingv1.SendMessageRequest, ctx: CallContext) => {
        arrived.add(request.message?.messageId ?? '');
        await gate;
        const id = request.message?.messageId ?? '';
        if (id.startsWith('bad')) throw HubError.invalidParams('message.messageId', `${id} is refused`);
        seen.set(id, ctx.principal);
        return { task: { id: `task-${id}` } };
      },
      sendMessages: groupedHandler((request: messagingv1.SendMessageRequest) => {
        if (request.blocking) throw HubError.invalidParams('blocking', 'a grouped send cannot block');
      }),
    },
    { get: (target, name: string) => (target as Record<string, unknown>)[name] ?? (async () => ({})) },
  );
  const server = new GrpcServer({ log: testLogger(), metrics, internalKey });
  server.add(messagingv1.MessagingService, handlers as never);
  const port = await server.listen('127.0.0.1:0');
  /** A client of its own: its calls wait for no other client's. */
  const connect = (): Messaging => createClient(messagingv1.MessagingService, `127.0.0.1:${port}`, { defaultTimeoutMs: 5000, internalKey });
  const client = connect();
  /** Holds every SendMessage until the returned function is called. */
  const hold = () => {
    let open!: () => void;
    gate = new Promise((resolve) => (open = resolve));
    return open;
  };
  /** Calls the server counted for `method`, by outcome code. */
  const served = async (method: string) => {
    const histograms = await metrics.registry.getMetricsAsJSON();
    const calls = histograms.find((metric) => metric.name === 'agenthub_grpc_server_handling_seconds');
    return (calls?.values ?? [])
      .filter((value) => (value as { metricName?: string }).metricName?.endsWith('_count') && value.labels.method === method)
      .reduce((sum, value) => sum + value.value, 0);
  };
  return { server, client, connect, seen, arrived, hold, served };
}

const send = (client: Messaging, id: string, principal: typeof alice | typeof bob, extra: { grouped?: boolean; signal?: AbortSignal } = { grouped: true }) =>
  client.sendMessage({ recipientAgentId: 'carol', message: { messageId: id } }, { principal, ...extra });

describe('grouped calls (SendMessages)', () => {
  let running: Awaited<ReturnType<typeof serve>>;
  beforeAll(async () => {
    running = await serve();
  });
  afterAll(async () => {
    running.client.close();
    await running.server.shutdown(100);
  });
  beforeEach(() => {
    running.seen.clear();
    running.arrived.clear();
  });

  it('sends the calls that come while two are on the wire as one group, each answered and trusted as its own', async () => {
    const { client, seen, hold, served } = running;
    const before = await served('SendMessages');
    const open = hold();
    // The first two go out alone and wait at the gate; the next ten queue behind them.
    const first = [send(client, 'm0', alice), send(client, 'm1', bob)];
    const queued = Array.from({ length: 10 }, (_, i) => send(client, `m${i + 2}`, i % 2 ? bob : alice));
    await new Promise((resolve) => setTimeout(resolve, 50));
    open();
    const answers = await Promise.all([...first, ...queued]);
    expect(answers.map((answer) => answer.task?.id)).toEqual(Array.from({ length: 12 }, (_, i) => `task-m${i}`));
    for (let i = 0; i < 12; i++) expect(seen.get(`m${i}`)).toEqual(i % 2 ? bob : alice);
    expect((await served('SendMessages')) - before).toBe(1);
  });

  describe('how many calls are on the wire at once', () => {
    let client: Messaging;
    beforeEach(() => {
      client = running.connect();
    });
    afterEach(() => client.close());
    const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    /**
     * Waits until `count` calls have reached the service (at most 2 s: a loaded machine may take
     * long to encode and send two full groups), then 50 ms more, so a call that went out when it
     * should have waited has arrived too.
     */
    const onTheWire = async (count: number) => {
      const until = Date.now() + 2_000;
      while (running.arrived.size < count && Date.now() < until) await pause(10);
      await pause(50);
    };

    it('two calls that come at once both go out at once, alone; a third waits for one of them, then goes out alone', async () => {
      const { arrived, hold, served } = running;
      const before = await served('SendMessages');
      const open = hold();
      const calls = [send(client, 'p0', alice), send(client, 'p1', bob), send(client, 'p2', alice)];
      await onTheWire(2);
      const onTheWireThen = new Set(arrived);
      open();
      await Promise.all(calls);
      expect(onTheWireThen).toEqual(new Set(['p0', 'p1']));
      expect(arrived).toEqual(new Set(['p0', 'p1', 'p2']));
      expect((await served('SendMessages')) - before).toBe(0);
    });

    it('the calls that come while a group is on the wire wait for it and go out as the next group', async () => {
      const { seen, arrived, hold, served } = running;
      const before = await served('SendMessages');
      const openFirst = hold();
      const first = [send(client, 'g0', alice), send(client, 'g1', bob)];
      const firstGroup = [send(client, 'g2', alice), send(client, 'g3', bob)];
      await onTheWire(2);
      openFirst();
      // The lone calls finish and the group goes out; it waits at the new gate.
      const openGroup = hold();
      await onTheWire(4);
      const next = [send(client, 'g4', bob), send(client, 'g5', alice)];
      await onTheWire(4);
      const onTheWireThen = new Set(arrived);
      openGroup();
      await Promise.all([...first, ...firstGroup, ...next]);
      expect(onTheWireThen).toEqual(new Set(['g0', 'g1', 'g2', 'g3']));
      expect((await served('SendMessages')) - before).toBe(2);
      expect([...seen.keys()].sort()).toEqual(['g0', 'g1', 'g2', 'g3', 'g4', 'g5']);
    });

    it(`sends a second group beside the first only when a full one (${MAX_GROUPED_CALLS} calls) waits`, async () => {
      const { arrived, hold, served } = running;
      const before = await served('SendMessages');
      const openFirst = hold();
      const first = [send(client, 'f', alice), send(client, 'f-', bob)];
      const queued = Array.from({ length: 2 * MAX_GROUPED_CALLS + 1 }, (_, i) => send(client, `f${i}`, i % 2 ? bob : alice));
      await onTheWire(2);
      openFirst();
      const openGroups = hold();
      await onTheWire(2 + 2 * MAX_GROUPED_CALLS);
      const onTheWireThen = arrived.size;
      openGroups();
      await Promise.all([...first, ...queued]);
      expect(onTheWireThen).toBe(2 + 2 * MAX_GROUPED_CALLS);
      expect((await served('SendMessages')) - before).toBe(2);
      expect(arrived.size).toBe(3 + 2 * MAX_GROUPED_CALLS);
    });
  });

  it('fails a refused call of a group alone, with its own reason and field', async () => {
    const { client, seen, hold } = running;
    const open = hold();
    const first = [send(client, 'a0', alice), send(client, 'a1', alice)];
    const grouped = [send(client, 'a2', alice), send(client, 'bad3', bob), send(client, 'a4', bob)].map((call) => call.then(
      (answer) => answer.task?.id,
      (err: HubError) => `${Reason[err.reason]} ${err.field}: ${err.message}`,
    ));
    await new Promise((resolve) => setTimeout(resolve, 50));
    open();
    await Promise.all(first);
    expect(await Promise.all(grouped)).toEqual(['task-a2', 'INVALID_PARAMS message.messageId: Invalid params: message.messageId bad3 is refused', 'task-a4']);
    expect([...seen.keys()].sort()).toEqual(['a0', 'a1', 'a2', 'a4']);
  });

  it('never groups a call that does not ask for it', async () => {
    const { client, hold, served } = running;
    const before = await served('SendMessages');
    const open = hold();
    const calls = Array.from({ length: 6 }, (_, i) => send(client, `n${i}`, alice, {}));
    await new Promise((resolve) => setTimeout(resolve, 50));
    open();
    await Promise.all(calls);
    expect(await served('SendMessages')).toBe(before);
  });

  it('drops a waiting call whose caller leaves before its group goes out', async () => {
    const { client, seen, hold } = running;
    const open = hold();
    const first = [send(client, 'c0', alice), send(client, 'c1', alice)];
    const leaving = new AbortController();
    const left = send(client, 'c2', alice, { grouped: true, signal: leaving.signal }).catch((err: HubError) => Reason[err.reason]);
    const staying = send(client, 'c3', alice);
    leaving.abort();
    expect(await left).toBe('UNAVAILABLE');
    open();
    await Promise.all([...first, staying]);
    expect([...seen.keys()].sort()).toEqual(['c0', 'c1', 'c3']);
  });

  it('does not send a waiting call whose deadline passed before its group went out: its caller gets DEADLINE_EXCEEDED', async () => {
    const { client, seen, hold } = running;
    const open = hold();
    const first = [send(client, 'd0', alice), send(client, 'd1', alice)];
    const late = client.sendMessage({ recipientAgentId: 'carol', message: { messageId: 'd2' } }, { principal: alice, grouped: true, timeoutMs: 30 }).catch((err: HubError) => Reason[err.reason]);
    const onTime = send(client, 'd3', alice);
    await new Promise((resolve) => setTimeout(resolve, 80));
    open();
    await Promise.all([...first, onTime]);
    expect(await late).toBe('DEADLINE_EXCEEDED');
    expect([...seen.keys()].sort()).toEqual(['d0', 'd1', 'd3']);
  });

  describe('a group sent by hand (someone holding the key, or replaying a group)', () => {
    const soon = () => Date.now() + 10_000;
    const signed = (principal: ForgedPrincipal, expires: number, path = SEND) => ({
      agentId: principal.kind === 'agent' ? principal.agentId : '',
      tenantId: principal.kind === 'agent' ? principal.tenantId : '',
      operator: principal.kind === 'operator',
      expiresMs: BigInt(expires),
      signature: forgeSignature(KEY, path, principal, expires),
    });
    const outcomes = async (sends: MessageInitShape<typeof messagingv1.SendMessagesRequestSchema>['sends']) =>
      (await running.client.sendMessages({ sends })).outcomes.map(({ outcome }) =>
        outcome.case === 'response' ? outcome.value.task?.id : `${outcome.case} ${outcome.value?.reason} ${outcome.value?.field}`,
      );

    it('trusts each call only as far as its own signature: another principal, method or key is refused, and only that call', async () => {
      const expires = soon();
      const aliceSigned = signed(alice, expires);
      const mallory: ForgedPrincipal = { kind: 'agent', agentId: 'mallory', tenantId: 'evil' };
      const message = (id: string) => ({ recipientAgentId: 'carol', message: { messageId: id } });
      const answers = await outcomes([
        { request: message('s0'), signature: aliceSigned },
        // alice's signature with mallory's name on it
        { request: message('s1'), signature: { ...aliceSigned, agentId: 'mallory', tenantId: 'evil' } },
        // alice's signature turned into the operator's
        { request: message('s2'), signature: { ...aliceSigned, operator: true } },
        // signed for GetTask, not SendMessage
        { request: message('s3'), signature: signed(alice, expires, `/${messagingv1.MessagingService.typeName}/GetTask`) },
        // signed with another key
        { request: message('s4'), signature: { ...signed(mallory, expires), signature: forgeSignature(randomBytes(32).toString('base64'), SEND, mallory, expires) } },
        // expired long ago
        { request: message('s5'), signature: signed(alice, Date.now() - 60_000) },
        // no signature at all
        { request: message('s6') },
      ]);
      const refused = `error ${Reason.UNAUTHENTICATED} `;
      expect(answers).toEqual(['task-s0', refused, refused, refused, refused, refused, refused]);
      expect([...running.seen.entries()]).toEqual([['s0', alice]]);
    });

    it('refuses a blocking call in a group, and a call with no request, alone', async () => {
      const expires = soon();
      const answers = await outcomes([
        { request: { recipientAgentId: 'carol', message: { messageId: 'b0' }, blocking: true }, signature: signed(alice, expires) },
        { signature: signed(alice, expires) },
        { request: { recipientAgentId: 'carol', message: { messageId: 'b2' } }, signature: signed(alice, expires) },
      ]);
      expect(answers).toEqual([`error ${Reason.INVALID_PARAMS} blocking`, `error ${Reason.INVALID_PARAMS} sends.request`, 'task-b2']);
      expect([...running.seen.keys()]).toEqual(['b2']);
    });

    it(`refuses a group of more than ${MAX_GROUPED_CALLS} calls whole`, async () => {
      const expires = soon();
      const sends = Array.from({ length: MAX_GROUPED_CALLS + 1 }, (_, i) => ({ request: { recipientAgentId: 'carol', message: { messageId: `g${i}` } }, signature: signed(alice, expires) }));
      await expect(running.client.sendMessages({ sends })).rejects.toMatchObject({ reason: Reason.INVALID_PARAMS, field: 'sends' });
      expect(running.seen.size).toBe(0);
    });
  });

  it('sends every call alone to a service that has no twin yet (an older version during a rolling update)', async () => {
    // A messaging server of before SendMessages: grpc-js answers that method UNIMPLEMENTED.
    const old = new grpc.Server();
    const seen: string[] = [];
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    old.addService({ sendMessage: methodDefinition(messagingv1.MessagingService.method.sendMessage) }, {
      sendMessage: (call: grpc.ServerUnaryCall<messagingv1.SendMessageRequest, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        void gate.then(() => {
          seen.push(call.request.message?.messageId ?? '');
          callback(null, create(messagingv1.SendMessageResponseSchema, { task: { id: `task-${call.request.message?.messageId}` } }));
        });
      },
    });
    const port = await new Promise<number>((resolve, reject) => old.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, bound) => (err ? reject(err) : resolve(bound))));
    const client: Messaging = createClient(messagingv1.MessagingService, `127.0.0.1:${port}`, { defaultTimeoutMs: 5000, internalKey });
    try {
      const calls = Array.from({ length: 8 }, (_, i) => send(client, `o${i}`, alice));
      await new Promise((resolve) => setTimeout(resolve, 50));
      open();
      expect((await Promise.all(calls)).map((answer) => answer.task?.id)).toEqual(Array.from({ length: 8 }, (_, i) => `task-o${i}`));
      expect(seen.sort()).toEqual(Array.from({ length: 8 }, (_, i) => `o${i}`));
    } finally {
      client.close();
      old.forceShutdown();
    }
  });
});
