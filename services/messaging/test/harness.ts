import { startIdentity } from '@agenthub/identity';
import { identityv1, messagingv1 } from '@agenthub/proto';
import { createClient, type CallOptions, type Client, type Db, type Kv, type Queryable, type RunningService } from '@agenthub/runtime';
import { TestStackBackends, testLogger, type Backend, type TestServiceDeps } from '@agenthub/testing';
import { messagingEnv, startMessaging, type MessagingEnv, type MessagingLimits } from '../src/index.js';

export interface TestAgent {
  id: string;
  tenantId: string;
  as: CallOptions;
}

export type MessagingClient = Client<typeof messagingv1.MessagingService.method> & { close(): void };

/** A clock the tests move by hand: expiry and redelivery without sleeping. */
export class TestClock {
  constructor(public ms = Date.now()) {}
  readonly now = () => this.ms;
  advance(ms: number) {
    this.ms += ms;
  }
}

/**
 * Identity plus `replicas` messaging services sharing one database, one Kv and one clock (as
 * replicas share PostgreSQL and Redis), each with its own client.
 */
export interface Stack {
  identity: Client<typeof identityv1.IdentityService.method> & { close(): void };
  replicas: MessagingClient[];
  /** The environment the sweeper of a replica would use (same db, kv and clock). */
  env: MessagingEnv;
  db: Db;
  clock: TestClock;
  /**
   * Resolves once a replica has subscribed to a Kv channel naming `agentId` (an inbox long-poll,
   * a blocking send or a task stream about to wait): from then on a change reaches it as a wake-up.
   */
  listening(agentId: string): Promise<void>;
  /** Kv subscriptions the replicas hold now (made and not yet ended). */
  subscriptions(): number;
  agent(tenantId: string, name: string): Promise<TestAgent>;
  /** Stops every messaging replica and starts them again on the same database and Kv. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

export const operator: CallOptions = { principal: { kind: 'operator' } };

/** `db`, pushing the SQL of every statement it runs by `query` (outside transactions) to `statements`. */
export function counting<T extends Queryable>(db: T, statements: string[]): T {
  return new Proxy(db, {
    get(target, property) {
      if (property === 'query') {
        return (...[sql, params, signal]: Parameters<Queryable['query']>) => {
          statements.push(sql);
          return target.query(sql, params, signal);
        };
      }
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

export async function startStack(
  backend: Backend,
  options: {
    replicas?: number;
    limits?: Partial<MessagingLimits>;
    /** Runs on the messaging database before the first replica starts (and migrates it). */
    before?: (db: Db) => Promise<void>;
    /** For `restart()`: an embedded messaging database on disk (slower) instead of in memory. */
    restartable?: boolean;
  } = {},
): Promise<Stack> {
  const log = testLogger();
  const backends = await TestStackBackends.open(backend, log);
  const identityService = backends.started(await startIdentity(await backends.deps('identity')));
  const clock = new TestClock();
  // Durable when restartable, so that restart() reaches the same data through new handles.
  let shared = await backends.deps('messaging', { durable: options.restartable });
  const replicas: MessagingClient[] = [];
  const replicaDeps: (typeof shared)[] = [];
  for (let i = 0; i < (options.replicas ?? 1); i += 1) {
    // Replicas after the first get their own pool and Kv connection on the real backend.
    replicaDeps.push(i === 0 || !backends.provisioned.databaseUrl ? shared : await backends.deps('messaging'));
  }
  const messaging: RunningService[] = [];
  const listeners = new Set<{ agentId: string; heard: () => void }>();
  let subscriptions = 0;
  /** The replica's Kv, telling `listening` about each subscription once it is made. */
  const observed = (kv: Kv): Kv =>
    new Proxy(kv, {
      get(target, property, receiver) {
        if (property === 'subscribe') {
          return async (...args: Parameters<Kv['subscribe']>) => {
            const unsubscribe = await target.subscribe(...args);
            subscriptions += 1;
            for (const listener of [...listeners]) {
              if (!args[0].includes(listener.agentId)) continue;
              listeners.delete(listener);
              listener.heard();
            }
            let ended = false;
            return async () => {
              if (!ended) subscriptions -= 1;
              ended = true;
              await unsubscribe();
            };
          };
        }
        const value: unknown = Reflect.get(target, property, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
  const startReplicas = async () => {
    for (const own of replicaDeps) {
      const service = await startMessaging({
        ...own,
        kv: observed(own.kv),
        identityAddr: identityService.address,
        limits: options.limits,
        sweepIntervalMs: 3_600_000,
        now: clock.now,
      });
      messaging.push(service);
      replicas.push(createClient(messagingv1.MessagingService, service.address, { defaultTimeoutMs: 20_000, internalKey: backends.internalKey }));
    }
  };
  await options.before?.(shared.db);
  await startReplicas();
  const identity = createClient(identityv1.IdentityService, identityService.address, { defaultTimeoutMs: 5000, internalKey: backends.internalKey });
  let env = messagingEnv({ db: shared.db, kv: shared.kv, identity, limits: options.limits, now: clock.now });
  return {
    identity,
    replicas,
    get env() {
      return env;
    },
    get db() {
      return shared.db;
    },
    clock,
    listening(agentId) {
      return new Promise((heard) => listeners.add({ agentId, heard }));
    },
    subscriptions: () => subscriptions,
    async agent(tenantId, name) {
      const { agent } = await identity.createAgent({ tenantId, name, createTenant: true }, operator);
      if (!agent) throw new Error('CreateAgent returned no agent');
      return { id: agent.id, tenantId, as: { principal: { kind: 'agent', agentId: agent.id, tenantId } } };
    },
    async restart() {
      if (!options.restartable) throw new Error('restart() needs startStack(backend, { restartable: true })');
      for (const client of replicas.splice(0)) client.close();
      for (const service of messaging.splice(0)) await service.stop(1000);
      // New handles, as restarted processes open: nothing survives in a pool or a connection.
      const reopened = new Map<TestServiceDeps, TestServiceDeps>();
      for (const own of new Set(replicaDeps)) reopened.set(own, await backends.reopen(own));
      replicaDeps.splice(0, replicaDeps.length, ...replicaDeps.map((own) => reopened.get(own)!));
      shared = replicaDeps[0]!;
      env = messagingEnv({ db: shared.db, kv: shared.kv, identity, limits: options.limits, now: clock.now });
      await startReplicas();
    },
    async stop() {
      identity.close();
      for (const client of replicas) client.close();
      for (const service of messaging) await service.stop(1000);
      await backends.close();
    },
  };
}

export { failure } from '@agenthub/testing';
