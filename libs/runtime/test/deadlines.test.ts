import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { identityv1 } from '@agenthub/proto';
import { createClient, GrpcServer, HubError, InternalKey, Metrics, PostgresDb, Reason, type Db } from '@agenthub/runtime';
import { backends, testLogger, type ProvisionedBackend } from '@agenthub/testing';
import { eventually } from './bus-conformance.js';

/**
 * A statement outlives no caller: a gRPC call's deadline reaches the PostgreSQL statement its
 * handler runs, which the server stops (not only the client giving up on the answer), and a
 * caller waiting for a pool connection stops waiting with its signal or the connect timeout.
 */
const real = backends().find((b) => b.name === 'postgres+redis');

async function failure(work: Promise<unknown>): Promise<{ err: HubError; ms: number }> {
  const started = performance.now();
  try {
    await work;
  } catch (err) {
    return { err: err as HubError, ms: performance.now() - started };
  }
  throw new Error('expected the call to fail');
}

(real ? describe : describe.skip)(`deadlines reach PostgreSQL${real ? '' : ' (skipped: no PostgreSQL reachable)'}`, () => {
  let provisioned: ProvisionedBackend;
  let db: Db;
  let observer: pg.Client;
  const internalKey = InternalKey.generate();

  beforeAll(async () => {
    provisioned = await real!.provision();
    db = new PostgresDb({ url: provisioned.databaseUrl!, schema: 'deadlines' });
    observer = new pg.Client({ connectionString: provisioned.databaseUrl });
    await observer.connect();
  });
  afterAll(async () => {
    await observer?.end();
    await db?.close();
    await provisioned?.dispose();
  });

  /** Backends of this database running a statement that contains `marker`. */
  const running = async (marker: string) => {
    const { rows } = await observer.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' AND pid <> pg_backend_pid() AND position($1 in query) > 0",
      [marker],
    );
    return rows[0]!.n;
  };

  it('a gRPC deadline cancels the slow query its handler runs: DEADLINE_EXCEEDED at once, and the server stops running it', async () => {
    const marker = `deadline_${randomBytes(6).toString('hex')}`;
    let handlerFailed: unknown;
    const server = new GrpcServer({ log: testLogger(), metrics: new Metrics(), internalKey });
    server.add(identityv1.IdentityService, new Proxy({}, {
      get: () => async (_request: unknown, ctx: { signal: AbortSignal }) => {
        try {
          await db.query(`SELECT pg_sleep(30) AS ${marker}`, [], ctx.signal);
        } catch (err) {
          handlerFailed = err;
          throw err;
        }
        return {};
      },
    }) as never);
    const address = `127.0.0.1:${await server.listen('127.0.0.1:0')}`;
    const client = createClient(identityv1.IdentityService, address, { defaultTimeoutMs: 300, internalKey });
    try {
      const { err, ms } = await failure(client.getAgent({ agentId: 'a' }));
      expect(err.reason).toBe(Reason.DEADLINE_EXCEEDED);
      expect(ms).toBeLessThan(2_000);
      // The handler's statement failed too (it was cancelled, not left running) ...
      await eventually(async () => handlerFailed !== undefined, 'the handler heard why its call ended', 2_000);
      // ... by whichever came first: the server's deadline, or the client's cancel at its own
      // deadline (earlier than the server's by the time the request took to be read, which a
      // loaded machine stretches; a server cannot tell that cancel from a caller leaving).
      expect([Reason.DEADLINE_EXCEEDED, Reason.UNAVAILABLE]).toContain((handlerFailed as HubError).reason);
      // ... and no backend still sleeps on its behalf.
      await eventually(async () => (await running(marker)) === 0, 'no statement of the call is running', 2_000);
      // The pool is whole: the next statement runs.
      expect((await db.query<{ one: number }>('SELECT 1 AS one', [], AbortSignal.timeout(2_000))).rows).toEqual([{ one: 1 }]);
    } finally {
      client.close();
      await server.shutdown(100);
    }
  });

  it('a caller leaving cancels a statement inside a transaction, which rolls back', async () => {
    await db.exec('CREATE SCHEMA IF NOT EXISTS deadlines; CREATE TABLE IF NOT EXISTS deadlines.marks (id text PRIMARY KEY)');
    const marker = `left_${randomBytes(6).toString('hex')}`;
    const caller = new AbortController();
    const transaction = db.transaction(async (tx) => {
      await tx.query('INSERT INTO marks (id) VALUES ($1)', [marker]);
      await tx.query(`SELECT pg_sleep(30) AS ${marker}`);
    }, caller.signal);
    await eventually(async () => (await running(marker)) === 1, 'the statement is running', 2_000);
    caller.abort();
    const { err, ms } = await failure(transaction);
    expect(err.reason).toBe(Reason.UNAVAILABLE);
    expect(ms).toBeLessThan(2_000);
    // The cancel is asked for when the caller leaves; the backend stops at its next interrupt check.
    await eventually(async () => (await running(marker)) === 0, 'no statement of the call is running', 2_000);
    expect((await db.query('SELECT 1 FROM marks WHERE id = $1', [marker])).rows).toEqual([]);
  });

  it('callers leaving together have every statement cancelled, one cancel at a time on the cancelling connection', async () => {
    // pg queues a statement sent while another runs on the same client, deprecated since pg 8 and
    // refused from pg 9: every cancel goes on one connection, so they must wait their turn.
    const query = pg.Client.prototype.query;
    const inFlight = new Map<unknown, number>();
    let most = 0;
    pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
      const result = (query as (...a: unknown[]) => unknown).apply(this, args);
      if (!String(args[0]).includes('pg_cancel_backend')) return result;
      inFlight.set(this, (inFlight.get(this) ?? 0) + 1);
      most = Math.max(most, inFlight.get(this)!);
      void Promise.resolve(result).then(
        () => inFlight.set(this, inFlight.get(this)! - 1),
        () => inFlight.set(this, inFlight.get(this)! - 1),
      );
      return result;
    } as typeof query;
    try {
      const marker = `together_${randomBytes(6).toString('hex')}`;
      const callers = Array.from({ length: 4 }, () => new AbortController());
      const statements = callers.map((caller) => failure(db.query(`SELECT pg_sleep(30) AS ${marker}`, [], caller.signal)));
      await eventually(async () => (await running(marker)) === 4, 'the four statements are running', 2_000);
      for (const caller of callers) caller.abort();
      for (const { err, ms } of await Promise.all(statements)) {
        expect(err.reason).toBe(Reason.UNAVAILABLE);
        expect(ms).toBeLessThan(2_000);
      }
      await eventually(async () => (await running(marker)) === 0, 'no statement of the call is running', 2_000);
      expect(most).toBe(1);
    } finally {
      pg.Client.prototype.query = query;
    }
  });

  it('a caller waiting for a pool connection stops with its signal, and any waiter with the connect timeout', async () => {
    const small = new PostgresDb({ url: provisioned.databaseUrl!, schema: 'deadlines', maxConnections: 1, connectTimeoutMs: 1_500 });
    let release = () => undefined as void;
    let holding = () => undefined as void;
    const acquired = new Promise<void>((resolve) => (holding = resolve));
    const held = small.transaction(() => {
      holding();
      return new Promise<void>((resolve) => (release = resolve));
    });
    await acquired;
    try {
      const withSignal = await failure(small.query('SELECT 1', [], AbortSignal.timeout(50)));
      expect(withSignal.err.reason).toBe(Reason.DEADLINE_EXCEEDED);
      // Margins for a loaded machine: the signal (50 ms) ends the wait long before the connect
      // timeout (1.5 s), which ends the wait of a caller without one.
      expect(withSignal.ms).toBeLessThan(1_000);
      const withoutSignal = await failure(small.query('SELECT 1'));
      expect(withoutSignal.ms).toBeGreaterThanOrEqual(1_400);
      expect(withoutSignal.ms).toBeLessThan(5_000);
    } finally {
      release();
      await held;
      await small.close();
    }
  });
});
