import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { startIdentity } from '@agenthub/identity';
import { identityv1, messagingv1 } from '@agenthub/proto';
import { createClient, createLogger, InternalKey, Metrics, migrate, openDb, openKv, type Client, type Db, type Kv, type Resolver, type RunningService } from '@agenthub/runtime';
import { testLogger, type Backend } from '@agenthub/testing';
import { messagingEnv, startMessaging, type IdentityClient, type MessagingEnv, type PushOptions } from '../src/index.js';
import type { TaskRecord } from '../src/task-store.js';
import { operator, TestClock, type MessagingClient, type TestAgent } from './harness.js';

/**
 * A stack for push agent tests: identity and two messaging replicas whose push workers share the
 * work. Push backoff and follow-ups run on the wall clock with a 200 ms cap; the service clock
 * (queue expiry) is moved by hand.
 */

export interface PushStack {
  replicas: MessagingClient[];
  env: MessagingEnv;
  db: Db;
  clock: TestClock;
  identity: Client<typeof identityv1.IdentityService.method>;
  /** Registers an agent; a push agent (with an endpoint) comes with its push secret. */
  agent(name: string, endpointUrl?: string, tenantId?: string): Promise<TestAgent & { pushSecret: string }>;
  /** The operator's `agents rotate-push-secret`. */
  rotatePushSecret(agentId: string): Promise<string>;
  /** Everything the services logged so far, at debug level. */
  logged(): string;
  stop(): Promise<void>;
}

/**
 * `allowPrivate` is HUB_EGRESS_ALLOW_PRIVATE of both services (the agents here listen on
 * loopback); `resolve` stands in for DNS; `push` overrides the push workers' options;
 * `shape.replicas` (default 2) how many messaging replicas run, and `shape.observe` and
 * `shape.observeKv` wrap the first replica's database and Kv (to see what it does with them).
 */
export async function startPushStack(
  backend: Backend,
  egress: { allowPrivate: boolean; resolve?: Resolver } = { allowPrivate: true },
  push: Partial<PushOptions> = {},
  shape: { replicas?: number; observe?: (db: Db) => Db; observeKv?: (kv: Kv) => Kv } = {},
): Promise<PushStack> {
  const lines: string[] = [];
  const log = createLogger({
    level: 'debug',
    destination: new Writable({
      write(chunk, _encoding, done) {
        lines.push(String(chunk));
        done();
      },
    }),
  });
  const provisioned = await backend.provision();
  const opened: { db: Db; kv: Kv }[] = [];
  const internalKey = InternalKey.generate();
  const base = async (schema: string) => {
    const db = await openDb({ url: provisioned.databaseUrl, schema });
    const kv = await openKv({ url: provisioned.redisUrl, prefix: provisioned.redisPrefix });
    opened.push({ db, kv });
    return { db, kv, log, metrics: new Metrics(), listen: '127.0.0.1:0', grpcTimeoutMs: 5000, internalKey };
  };
  const identityService = await startIdentity({ ...(await base('identity')), egress });
  const clock = new TestClock();
  const shared = await base('messaging');
  const services: RunningService[] = [];
  const replicas: MessagingClient[] = [];
  for (let i = 0; i < (shape.replicas ?? 2); i += 1) {
    // On the real backend the second replica has its own pool and Kv connection, as in production.
    const own = i === 0 || !provisioned.databaseUrl ? shared : await base('messaging');
    const service = await startMessaging({
      ...own,
      db: i === 0 && shape.observe ? shape.observe(own.db) : own.db,
      kv: i === 0 && shape.observeKv ? shape.observeKv(own.kv) : own.kv,
      identityAddr: identityService.address,
      limits: { blockingMs: 10_000 },
      sweepIntervalMs: 3_600_000,
      now: clock.now,
      push: { maxBackoffMs: 200, minBackoffMs: 50, pollMs: 100, timeoutMs: 1_000, ...push },
      egress,
    });
    services.push(service);
    replicas.push(createClient(messagingv1.MessagingService, service.address, { defaultTimeoutMs: 20_000, internalKey }));
  }
  const identity = createClient(identityv1.IdentityService, identityService.address, { defaultTimeoutMs: 5000, internalKey });
  return {
    replicas,
    env: messagingEnv({ db: shared.db, kv: shared.kv, identity, now: clock.now }),
    db: shared.db,
    clock,
    identity,
    async agent(name, endpointUrl = '', tenantId = 'acme') {
      const { agent, pushSecret } = await identity.createAgent({ tenantId, name, endpointUrl, createTenant: true }, operator);
      return { id: agent!.id, tenantId, as: { principal: { kind: 'agent', agentId: agent!.id, tenantId } }, pushSecret };
    },
    logged: () => lines.join(''),
    async rotatePushSecret(agentId) {
      return (await identity.rotatePushSecret({ agentId }, operator)).pushSecret;
    },
    async stop() {
      identity.close();
      for (const client of replicas) client.close();
      for (const service of services) await service.stop(1000);
      await identityService.stop(1000);
      await Promise.all(opened.flatMap(({ db, kv }) => [db.close(), kv.close()]));
      await provisioned.dispose();
    },
  };
}

/**
 * The messaging service's state without its gRPC server, for tests that drive a push worker
 * themselves: a migrated database on `backend`, its Kv, and the env over both with `identity`.
 */
export async function openMessagingEnv(backend: Backend, identity: IdentityClient): Promise<{ db: Db; kv: Kv; env: MessagingEnv; close(): Promise<void> }> {
  const provisioned = await backend.provision();
  const db = await openDb({ url: provisioned.databaseUrl, schema: 'messaging' });
  const kv = await openKv({ url: provisioned.redisUrl, prefix: provisioned.redisPrefix });
  await migrate(db, { schema: 'messaging', dir: new URL('../migrations/', import.meta.url), log: testLogger() });
  return {
    db,
    kv,
    env: messagingEnv({ db, kv, identity }),
    async close() {
      await db.close();
      await kv.close();
      await provisioned.dispose();
    },
  };
}

/** A new task as createTask takes it: created now, version 1, counted by createTask itself. */
export function newTaskRecord(fields: Pick<TaskRecord, 'id' | 'contextId' | 'senderAgentId' | 'senderTenantId' | 'recipientAgentId' | 'state' | 'messages'>): TaskRecord {
  const now = Date.now();
  return { ...fields, artifacts: [], createdAt: now, updatedAt: now, messageCount: 0, artifactCount: 0, bytes: 0, version: 1 };
}

export interface Recorder {
  url: string;
  received: { method: string; url: string; headers: IncomingHttpHeaders; body: string }[];
  close(): Promise<void>;
}

/** A plain HTTP endpoint on loopback that records requests and answers as told (not an A2A agent). */
export async function startRecorder(answer: (index: number) => { status: number; headers?: Record<string, string>; body: string }): Promise<Recorder> {
  const received: Recorder['received'] = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
    const reply = answer(received.length - 1);
    res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers }).end(reply.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Polls `check` every 50 ms until it returns a value (bounded: about `ms`, 10 s by default). */
export async function eventually<T>(check: () => Promise<T | undefined | false>, what: string, ms = 10_000): Promise<T> {
  for (let i = 0; i < ms / 50; i += 1) {
    const value = await check();
    if (value) return value;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`Timed out waiting for ${what}`);
}

/** An endpoint that accepts every request and never answers (until it closes), counting them. */
export async function startTarpit(): Promise<{ url: string; load: { now: number; max: number }; close(): Promise<void> }> {
  const load = { now: 0, max: 0 };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    load.now += 1;
    load.max = Math.max(load.max, load.now);
    res.once('close', () => {
      load.now -= 1;
    });
    req.resume();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/a2a`,
    load,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
