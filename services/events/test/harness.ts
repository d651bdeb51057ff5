import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { startIdentity } from '@agenthub/identity';
import { eventsv1, identityv1, workspacev1 } from '@agenthub/proto';
import { createClient, createLogger, WORKSPACE_EVENTS_TOPIC, type CallOptions, type Client, type Db, type Resolver } from '@agenthub/runtime';
import { TestStackBackends, type Backend } from '@agenthub/testing';
import { startWorkspace } from '@agenthub/workspace';
import { startEvents, type EventsLimits } from '../src/index.js';
import type { RunningEvents } from '../src/index.js';

export interface TestAgent {
  id: string;
  as: CallOptions;
}

type Handler = (message: { topic: string; key: string; value: string; headers: Record<string, string>; offset: string }) => Promise<void>;

/**
 * A fake of the runtime's Bus for service tests: `publish` hands each message to the one
 * subscriber and resolves once its handler did (commit after handler), as the real consumer
 * group does for one member.
 */
export class FakeBus {
  private handler: Handler | undefined;
  private offset = 0;
  topics: string[] = [];
  group = '';

  async subscribe(group: string, topics: string[], handle: Handler) {
    this.group = group;
    this.topics = topics;
    this.handler = handle;
    return { stop: async () => void (this.handler = undefined) };
  }

  async publish(topic: string, messages: { key: string; value: string; headers: Record<string, string> }[]) {
    for (const message of messages) await this.handler?.({ ...message, topic, offset: String(++this.offset) });
  }

  async ping() {}
  async close() {}
}

let eventCounter = 0;

/** A workspace event as an outbox relay publishes it: the payload string and its id header. */
export function workspaceEvent(workspaceId: string, type: string, data: Record<string, unknown>, at: Date) {
  const eventId = `evt_test${++eventCounter}_${Math.random().toString(36).slice(2, 10)}`;
  const value = JSON.stringify({ event: type, timestamp: at.toISOString(), data: { workspace_id: workspaceId, ...data } });
  return { eventId, message: { key: workspaceId, value, headers: { 'event-id': eventId, 'event-type': type } } };
}

export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  eventId: string;
}

/** An HTTP endpoint recording what it receives; `respond` picks each answer. */
export interface Receiver {
  url: string;
  received: Received[];
  respond: (request: Received, index: number) => { status: number; headers?: Record<string, string> };
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const receiver: Receiver = {
    url: '',
    received: [],
    respond: () => ({ status: 204 }),
    close: async () => undefined,
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const entry = { headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), eventId: String(req.headers['webhook-id']) };
      receiver.received.push(entry);
      const answer = receiver.respond(entry, receiver.received.length - 1);
      res.writeHead(answer.status, answer.headers).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  receiver.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return receiver;
}

export type EventsClient = Client<typeof eventsv1.EventsService.method> & { close(): void };

export interface Stack {
  identity: Client<typeof identityv1.IdentityService.method> & { close(): void };
  workspace: Client<typeof workspacev1.WorkspaceService.method> & { close(): void };
  events: EventsClient;
  service: RunningEvents;
  bus: FakeBus;
  /** The events service's own database. */
  db: Db;
  clock: { now: number };
  agent(tenantId: string, name: string): Promise<TestAgent>;
  workspaceWith(owner: TestAgent, members?: [TestAgent, workspacev1.Role][]): Promise<string>;
  /** A workspace event stamped with the stack's clock. */
  event(workspaceId: string, type: string, data?: Record<string, unknown>): ReturnType<typeof workspaceEvent>;
  publish(...events: ReturnType<typeof workspaceEvent>[]): Promise<void>;
  stop(): Promise<void>;
}

export const operator: CallOptions = { principal: { kind: 'operator' } };

/** Every log line (debug and up) the services of this test file wrote, for the leak check. */
export const capturedLog: string[] = [];
const log = createLogger({
  level: 'debug',
  destination: new Writable({
    write(chunk, _encoding, done) {
      capturedLog.push(String(chunk));
      if (process.env.AGENTHUB_TEST_LOG) process.stdout.write(chunk);
      done();
    },
  }),
});

/** Identity, workspace and events services on one provisioned backend; the events worker is driven by hand. */
export async function startStack(
  backend: Backend,
  options: {
    allowPrivate?: boolean;
    resolve?: Resolver;
    limits?: Partial<EventsLimits>;
    timeoutMs?: number;
    /** The delivery loop's settings; without them it does not run (`deliverDue` drives it). */
    worker?: { concurrency: number; maxSlotsPerWorkspace: number; pollMs: number };
  } = {},
): Promise<Stack> {
  const backends = await TestStackBackends.open(backend, log);
  const identityService = backends.started(await startIdentity(await backends.deps('identity')));
  const workspaceService = backends.started(await startWorkspace({ ...(await backends.deps('workspace')), identityAddr: identityService.address }));
  const eventsDeps = await backends.deps('events');
  const bus = new FakeBus();
  const clock = { now: Date.UTC(2030, 0, 1) };
  const service = await startEvents({
    ...eventsDeps,
    workspaceAddr: workspaceService.address,
    // The fake carries only what the events service uses of a Bus.
    bus: bus as unknown as Parameters<typeof startEvents>[0]['bus'],
    allowPrivate: options.allowPrivate ?? true,
    timeoutMs: options.timeoutMs ?? 2000,
    limits: options.limits,
    resolve: options.resolve,
    clock: () => clock.now,
    worker: options.worker ? { ...options.worker, enabled: true } : { enabled: false },
  });
  const identity = createClient(identityv1.IdentityService, identityService.address, { defaultTimeoutMs: 5000, internalKey: backends.internalKey });
  const workspace = createClient(workspacev1.WorkspaceService, workspaceService.address, { defaultTimeoutMs: 5000, internalKey: backends.internalKey });
  const events = createClient(eventsv1.EventsService, service.address, { defaultTimeoutMs: 10000, internalKey: backends.internalKey });
  return {
    identity,
    workspace,
    events,
    service,
    bus,
    db: eventsDeps.db,
    clock,
    async agent(tenantId, name) {
      const { agent } = await identity.createAgent({ tenantId, name, createTenant: true }, operator);
      return { id: agent!.id, as: { principal: { kind: 'agent', agentId: agent!.id, tenantId } } };
    },
    async workspaceWith(owner, members = []) {
      const { workspace: created } = await workspace.createWorkspace({ name: 'Hooks' }, owner.as);
      for (const [agent, role] of members) await workspace.addMember({ workspaceId: created!.id, agentId: agent.id, role }, owner.as);
      return created!.id;
    },
    event(workspaceId, type, data = {}) {
      return workspaceEvent(workspaceId, type, data, new Date(clock.now));
    },
    async publish(...published) {
      await bus.publish(WORKSPACE_EVENTS_TOPIC, published.map((e) => e.message));
    },
    async stop() {
      identity.close();
      workspace.close();
      events.close();
      await service.stop(1000);
      await backends.close();
    },
  };
}

export { failure } from '@agenthub/testing';
