import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DbBus, loadConfig, MemoryKv, openBus, openDb, PostgresDb, type Db } from '@agenthub/runtime';
import { backends, testLogger, type ProvisionedBackend } from '@agenthub/testing';
import { describeBusConformance, eventually } from './bus-conformance.js';

const log = testLogger();
const fast = { pollMs: 20, retryDelayMs: 50, leaseMs: 2_000 };

for (const backend of backends()) {
  describeBusConformance(`DbBus (${backend.name})`, async () => {
    const provisioned = await backend.provision();
    if (!provisioned.databaseUrl) {
      // PGlite holds its database in this process: every client shares the one handle.
      const db = await openDb({ schema: 'bus' });
      return {
        connect: () => DbBus.open({ db, log, ...fast }),
        teardown: () => db.close(),
      };
    }
    const url = provisioned.databaseUrl;
    return {
      connect: async () => DbBus.open({ db: new PostgresDb({ url, schema: 'bus', maxConnections: 4 }), log, ownsDb: true, ...fast }),
      teardown: () => provisioned.dispose(),
    };
  });
}

describe.each(backends().map((b) => [b.name, b] as const))('DbBus (%s)', (_name, backend) => {
  let provisioned: ProvisionedBackend;
  let db: Db;

  beforeAll(async () => {
    provisioned = await backend.provision();
    db = await openDb({ url: provisioned.databaseUrl, schema: 'bus' });
  });
  afterAll(async () => {
    await db?.close();
    await provisioned?.dispose();
  });

  it('deletes expired messages only once every group reading their topic handled them', async () => {
    const bus = await DbBus.open({ db, log, ...fast, retentionMs: 0 });
    try {
      await bus.publish('retained', [1, 2, 3].map((i) => ({ key: 'k', value: String(i), headers: {} })));
      const handled: string[] = [];
      const fastReader = await bus.subscribe('caught-up', ['retained'], async (m) => void handled.push(m.value));
      await eventually(() => handled.length === 3, 'the first group handled all three');
      await fastReader.stop();
      let slowHandled = 0;
      const slowReader = await bus.subscribe('behind', ['retained'], async (m) => {
        if (m.value === '2') throw new Error('not yet');
        slowHandled += 1;
      });
      await eventually(() => slowHandled === 1, 'the second group handled the first message');

      await bus.deleteExpired();
      const { rows } = await db.query<{ value: string }>("SELECT value FROM bus.messages WHERE topic = 'retained' ORDER BY \"offset\"");
      expect(rows.map((r) => r.value)).toEqual(['2', '3']);
      await slowReader.stop();
    } finally {
      await bus.close();
    }
  });

  /** `db`, counting the consumers' reads of the log on their way to the database. */
  /** `db` counting the reads of the log, the last of each text kept with its parameters. */
  const countingReads = () => {
    const counter = { reads: 0 };
    const reads = new Map<string, readonly unknown[] | undefined>();
    const counting = new Proxy(db, {
      get(target, property) {
        if (property === 'query') {
          return (sql: string, params?: readonly unknown[], signal?: AbortSignal) => {
            if (sql.includes('FROM bus.messages m')) {
              counter.reads += 1;
              reads.set(sql, params);
            }
            return target.query(sql, params, signal);
          };
        }
        const value: unknown = Reflect.get(target, property);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    return { counting, counter, reads };
  };

  /** Rows of bus.messages a statement looks at (returned or filtered out), from EXPLAIN ANALYZE. */
  const rowsLookedAt = async (sql: string, params: readonly unknown[] | undefined): Promise<number> => {
    const { rows } = await db.query<{ 'QUERY PLAN': unknown }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`, params);
    const raw = rows[0]!['QUERY PLAN'];
    type PlanNode = Record<string, unknown> & { Plans?: PlanNode[] };
    const [{ Plan }] = (typeof raw === 'string' ? JSON.parse(raw) : raw) as [{ Plan: PlanNode }];
    const count = (node: PlanNode): number => {
      const loops = Number(node['Actual Loops'] ?? 1);
      const own = node['Relation Name'] === 'messages' ? Number(node['Actual Rows'] ?? 0) + Number(node['Rows Removed by Filter'] ?? 0) : 0;
      const joined = Number(node['Rows Removed by Join Filter'] ?? 0);
      return (own + joined) * loops + (node.Plans ?? []).reduce((sum, child) => sum + count(child), 0);
    };
    return count(Plan);
  };

  it("reads only what follows the group's offsets, however long the log behind them, a quiet topic's included", async () => {
    const { counting, reads } = countingReads();
    const bus = await DbBus.open({ db: counting, log, ...fast });
    try {
      // A group that handled a long log: a quiet topic's one message, then 20,000 of a busy topic.
      await db.query("INSERT INTO bus.messages (topic, key, value, headers, created_at) VALUES ('quiet-log', 'k', 'old', '{}', 0)");
      await db.query("INSERT INTO bus.messages (topic, key, value, headers, created_at) SELECT 'long-log', 'k', 'old', '{}', 0 FROM generate_series(1, 20000)");
      await db.query(
        `INSERT INTO bus.group_offsets (group_id, topic, committed)
         SELECT 'long-reader', topic, max("offset") FROM bus.messages WHERE topic IN ('quiet-log', 'long-log') GROUP BY topic`,
      );
      await bus.publish('long-log', [{ key: 'k', value: 'new', headers: {} }]);
      await bus.publish('quiet-log', [{ key: 'k', value: 'new', headers: {} }]);
      const handled: string[] = [];
      const reader = await bus.subscribe('long-reader', ['quiet-log', 'long-log'], async (m) => void handled.push(`${m.topic} ${m.value}`));
      await eventually(() => handled.length === 2, 'the group handled the two new messages');
      await reader.stop();
      expect(handled).toEqual(['long-log new', 'quiet-log new']);
      expect(await bus.consumerLag('long-reader', ['quiet-log', 'long-log'])).toEqual([
        { topic: 'quiet-log', messages: 0 },
        { topic: 'long-log', messages: 0 },
      ]);
      // The consumer's read and the lag count: a handful of rows each, where they walked all 20,001.
      expect(reads.size).toBe(2);
      for (const [sql, params] of reads) expect(await rowsLookedAt(sql, params)).toBeLessThan(100);
    } finally {
      await bus.close();
    }
  });

  it("wakes its own process's consumer once per publish: the wake-up's copy back through the Kv costs no second read", async () => {
    const { counting, counter } = countingReads();
    // No poll in the test's time: every read is a wake-up's.
    const bus = await DbBus.open({ db: counting, log, pollMs: 60_000, retryDelayMs: 50, leaseMs: 2_000, kv: new MemoryKv() });
    try {
      const handled: string[] = [];
      await bus.subscribe('woken-once', ['wake-once'], async (m) => void handled.push(m.value));
      await eventually(() => counter.reads > 0, 'the consumer made its first read');
      await new Promise((resolve) => setTimeout(resolve, 100));
      const before = counter.reads;
      await bus.publish('wake-once', [{ key: 'k', value: 'one', headers: {} }]);
      await eventually(() => handled.length === 1, 'the consumer handled the message');
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(counter.reads - before).toBe(1);
    } finally {
      await bus.close();
    }
  });

  it('lets an idle consumer poll less and less (up to a second apart) when a Kv carries wake-ups, and at its poll interval without one', async () => {
    const idleReads = async (kv: MemoryKv | undefined) => {
      const { counting, counter } = countingReads();
      const bus = await DbBus.open({ db: counting, log, pollMs: 20, retryDelayMs: 50, leaseMs: 2_000, kv });
      try {
        await bus.subscribe(`idle-${kv ? 'woken' : 'polling'}`, ['nothing-published'], async () => undefined);
        await eventually(() => counter.reads > 0, 'the consumer made its first read');
        const before = counter.reads;
        await new Promise((resolve) => setTimeout(resolve, 1_500));
        return counter.reads - before;
      } finally {
        await bus.close();
      }
    };
    // 20, 40, 80, … 640 ms, then a second apart: about seven reads; 20 ms apart it would be seventy.
    expect(await idleReads(new MemoryKv())).toBeLessThanOrEqual(10);
    // Without a Kv, a publish in another process reaches the consumer only by its polls.
    expect(await idleReads(undefined)).toBeGreaterThanOrEqual(20);
  });

  const realOnly = backend.name === 'embedded' ? it.skip : it;
  realOnly(`hands a group over to another member when its holder dies${backend.name === 'embedded' ? ' (skipped: one process per PGlite database)' : ''}`, async () => {
    const url = provisioned.databaseUrl!;
    const dying = new PostgresDb({ url, schema: 'bus', maxConnections: 2 });
    const survivorDb = new PostgresDb({ url, schema: 'bus', maxConnections: 2 });
    const options = { log, pollMs: 20, retryDelayMs: 50, leaseMs: 500 };
    const holder = await DbBus.open({ db: dying, ...options });
    const successor = await DbBus.open({ db: survivorDb, ...options });
    try {
      const byHolder: string[] = [];
      const bySuccessor: string[] = [];
      await holder.subscribe('takeover', ['handover'], async (m) => void byHolder.push(m.value));
      await holder.publish('handover', [{ key: 'k', value: 'one', headers: {} }]);
      await eventually(() => byHolder.length === 1, 'the holder handled the first message');
      await successor.subscribe('takeover', ['handover'], async (m) => void bySuccessor.push(m.value));

      // The holder's process loses its database: no more heartbeats, no release.
      await dying.close();
      await successor.publish('handover', [{ key: 'k', value: 'two', headers: {} }]);
      await eventually(() => bySuccessor.length === 1, 'the successor took over');
      expect(bySuccessor).toEqual(['two']);
      expect(byHolder).toEqual(['one']);
    } finally {
      await holder.close();
      await successor.close();
      await survivorDb.close();
    }
  });
});

describe('openBus', () => {
  it('opens the embedded bus in HUB_DATA_DIR without KAFKA_BROKERS or DATABASE_URL', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'agenthub-bus-'));
    try {
      const bus = await openBus(loadConfig({ HUB_DATA_DIR: dataDir }), log);
      try {
        expect(bus).toBeInstanceOf(DbBus);
        const got: string[] = [];
        await bus.subscribe('g', ['t'], async (m) => void got.push(m.value));
        await bus.publish('t', [{ key: 'k', value: 'hello', headers: {} }]);
        await eventually(() => got.length === 1, 'the message arrived');
        expect(got).toEqual(['hello']);
      } finally {
        await bus.close();
      }
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
