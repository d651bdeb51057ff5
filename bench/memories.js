#!/usr/bin/env node
// Benchmark: workspace memories through the workspace service's gRPC API (StoreMemory,
// QueryMemories) on PostgreSQL with the embedded exact vector store, at 1,000 and 10,000
// memories in one workspace, with the built-in embedding model (Universal Sentence Encoder lite
// in worker threads) and without it (the same vectors replayed from memory, so only the service,
// the database and the vector search are measured). See bench/README.md.
//
//   npm run bench                         (builds first; `prebench`; runs workspace-get too)
//   node bench/memories.js                (after `npm run build`)
//
// Settings (environment):
//   BENCH_MEMORIES      memories stored per workspace (default 10000; checkpoints at 1000 and at this)
//   BENCH_QUERIES       queries timed at each checkpoint, one at a time (default 200)
//   BENCH_CONCURRENCY   concurrent StoreMemory calls (default 32)
//   BENCH_THREADS       embedding worker threads (default: the service default for this machine)
//   BENCH_PG_URL        PostgreSQL admin URL (default postgres://postgres@127.0.0.1:5432/postgres);
//                       BENCH_PG_URL=embedded runs on PGlite instead
//
// Targets on a 2-core machine: store ≥ 100 memories/s with the built-in model; query p50 ≤ 25 ms at
// 10,000 memories including embedding. Exit status: 0 when the benchmark ran (PASS or BELOW TARGET
// is printed), 1 on failure, 2 when PostgreSQL is unreachable.

import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { cpus, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
const RESULTS_DIR = join(HERE, 'results');
const TARGET_STORE_PER_SEC = 100;
const TARGET_QUERY_P50_MS = 25;

const log = (line = '') => process.stdout.write(`${line}\n`);

function settings() {
  const number = (name, fallback, min) => {
    const raw = process.env[name];
    if (raw === undefined || raw === '') return fallback;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < min) throw new Error(`${name} must be an integer ≥ ${min} (got "${raw}")`);
    return value;
  };
  const memories = number('BENCH_MEMORIES', 10_000, 10);
  return {
    memories,
    checkpoints: [...new Set([Math.min(1000, memories), memories])],
    queries: number('BENCH_QUERIES', 200, 10),
    concurrency: number('BENCH_CONCURRENCY', 32, 1),
    threads: process.env.BENCH_THREADS ? number('BENCH_THREADS', 1, 1) : undefined,
    pgUrl: process.env.BENCH_PG_URL || 'postgres://postgres@127.0.0.1:5432/postgres',
  };
}

// ---------------------------------------------------------------------------------------------
// Synthetic memories: deterministic, distinct, and varied enough that the search has work to do.

function generator(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = {
  who: ['The platform team', 'Alice', 'Bob', 'The data team', 'Our CTO', 'The mobile squad', 'Support', 'The security group', 'Carol', 'The billing crew', 'Finance', 'The design team'],
  verb: ['decided to migrate', 'prefers to rewrite', 'will deprecate', 'wants to benchmark', 'agreed to document', 'plans to shard', 'must review', 'chose to cache', 'is rolling out', 'paused work on'],
  what: ['the payments service', 'the search index', 'the login flow', 'the nightly backups', 'the analytics pipeline', 'the public API', 'the onboarding emails', 'the invoice generator', 'the mobile app', 'the status page', 'the feature flags', 'the message queue', 'the image resizer', 'the audit log'],
  how: ['using Postgres', 'with Redis', 'on Kubernetes', 'behind a feature flag', 'with Kafka', 'in Go', 'in TypeScript', 'with gRPC', 'on spot instances', 'with a canary release'],
  when: ['before the summer release', 'by the end of the quarter', 'next sprint', 'after the security audit', 'in March', 'once the budget is approved', 'this week', 'before Black Friday'],
};
const TYPES = ['fact', 'decision', 'preference', 'todo', 'context', 'reference'];

function memories(count) {
  const random = generator(42);
  const pick = (list) => list[Math.floor(random() * list.length)];
  const out = [];
  for (let i = 0; i < count; i++) {
    out.push({
      content: `${pick(WORDS.who)} ${pick(WORDS.verb)} ${pick(WORDS.what)} ${pick(WORDS.how)} ${pick(WORDS.when)} (note ${i + 1}).`,
      type: TYPES[i % TYPES.length],
      tags: [pick(['infra', 'product', 'ops', 'finance', 'people']), pick(['q1', 'q2', 'q3', 'q4'])],
    });
  }
  return out;
}

function queries(count) {
  const random = generator(7);
  const pick = (list) => list[Math.floor(random() * list.length)];
  const forms = [
    () => `what did ${pick(WORDS.who).toLowerCase()} decide about ${pick(WORDS.what)}`,
    () => `who is working on ${pick(WORDS.what)}`,
    () => `plans for ${pick(WORDS.what)} ${pick(WORDS.when)}`,
    () => `anything about ${pick(WORDS.how).replace(/^(using|with|on|in|behind) /, '')}`,
  ];
  return Array.from({ length: count }, (_, i) => `${forms[i % forms.length]()} #${i}`);
}

// ---------------------------------------------------------------------------------------------

/** The built-in embedder, remembering every vector it made so the replay run can reuse them. */
class Recording {
  constructor(inner) {
    this.inner = inner;
    this.modelId = inner.modelId;
    this.vectors = new Map();
  }
  get dimensions() {
    return this.inner.dimensions;
  }
  async embed(texts, signal) {
    const out = await this.inner.embed(texts, signal);
    texts.forEach((t, i) => this.vectors.set(t, out[i]));
    return out;
  }
  close() {
    return this.inner.close();
  }
}

/** Embedding excluded: the vectors the built-in model made for the same texts, from memory. */
class Replay {
  constructor(recording) {
    this.vectors = recording.vectors;
    this.modelId = recording.modelId;
    this.dimensions = recording.dimensions;
  }
  async embed(texts) {
    return texts.map((t) => {
      const v = this.vectors.get(t);
      if (!v) throw new Error(`no recorded vector for "${t}"`);
      return v;
    });
  }
  async close() {}
}

function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

async function main() {
  const opts = settings();
  const cleanups = [];
  const cleanup = async () => {
    while (cleanups.length) await cleanups.pop()().catch((err) => console.error(`bench: cleanup failed: ${err?.message ?? err}`));
  };
  process.once('SIGINT', () => cleanup().finally(() => process.exit(130)));
  try {
    await run(opts, cleanups);
  } finally {
    await cleanup();
  }
}

async function run(opts, cleanups) {

  const { startIdentity } = await import('../services/identity/dist/index.js');
  const { startWorkspace, UseLiteEmbedder, defaultEmbeddingThreads } = await import('../services/workspace/dist/index.js');
  const { createClient, createLogger, InternalKey, Metrics, openDb, openKv } = await import('../libs/runtime/dist/index.js');
  const { identityv1, workspacev1 } = await import('../libs/proto/dist/index.js');

  const threads = opts.threads ?? defaultEmbeddingThreads();
  // Other processes' load skews every figure on a small machine: record it with the results.
  const loadBefore = loadavg()[0];
  log(`AgentHub benchmark: memories (StoreMemory, QueryMemories over gRPC), node ${process.version}, ${cpus().length} CPUs`);
  log(`  ${opts.memories} memories per workspace, ${opts.queries} queries per checkpoint, ${opts.concurrency} concurrent stores, ${threads} embedding thread(s)`);

  // Peak memory of this process (the service, its embedding threads and the driver).
  let peakRss = process.memoryUsage().rss;
  const sampler = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage().rss)), 100);
  cleanups.push(async () => clearInterval(sampler));

  // Backends: a fresh PostgreSQL database (or in-memory PGlite).
  let databaseUrl;
  if (opts.pgUrl !== 'embedded') {
    const pg = (await import('pg')).default;
    const name = `agenthub_bench_${randomBytes(5).toString('hex')}`;
    const admin = new pg.Client({ connectionString: opts.pgUrl });
    try {
      await admin.connect();
    } catch (err) {
      console.error(`bench: PostgreSQL at ${opts.pgUrl} is unreachable (${err.message}); set BENCH_PG_URL, or BENCH_PG_URL=embedded`);
      process.exit(2);
    }
    await admin.query(`CREATE DATABASE ${name}`);
    await admin.end();
    const url = new URL(opts.pgUrl);
    url.pathname = `/${name}`;
    databaseUrl = url.toString();
    cleanups.push(async () => {
      const c = new pg.Client({ connectionString: opts.pgUrl });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    });
    log(`  database ${name}`);
  } else log('  database: embedded PGlite (in memory)');

  const quiet = createLogger({ level: 'warn' });
  // The services and this script's clients sign their calls with one key.
  const internalKey = InternalKey.generate();
  const deps = async (schema) => {
    const db = await openDb({ url: databaseUrl, schema });
    const kv = await openKv({});
    cleanups.push(() => db.close(), () => kv.close());
    return { db, kv, log: quiet, metrics: new Metrics(), listen: '127.0.0.1:0', grpcTimeoutMs: 30_000, internalKey };
  };
  const identityService = await startIdentity(await deps('identity'));
  cleanups.push(() => identityService.stop(1000));
  const workspaceDeps = await deps('workspace');
  const recording = new Recording(new UseLiteEmbedder({ threads }));
  cleanups.push(() => recording.close());

  const identity = createClient(identityv1.IdentityService, identityService.address, { defaultTimeoutMs: 30_000, internalKey });
  cleanups.push(async () => identity.close());
  const { agent } = await identity.createAgent({ tenantId: 'bench', name: 'bench agent', createTenant: true }, { principal: { kind: 'operator' } });
  const as = { principal: { kind: 'agent', agentId: agent.id, tenantId: 'bench' } };

  const data = memories(opts.memories);
  const questions = queries(opts.queries);
  const results = {};

  for (const [label, embedder] of [['embedding included', recording], ['embedding excluded', null]]) {
    const used = embedder ?? new Replay(recording);
    const service = await startWorkspace({ ...workspaceDeps, identityAddr: identityService.address, embedder: used });
    const client = createClient(workspacev1.WorkspaceService, service.address, { defaultTimeoutMs: 60_000, internalKey });
    const { workspace } = await client.createWorkspace({ name: `bench ${label}` }, as);
    log(`\n[${label}] workspace ${workspace.id}`);
    if (embedder) {
      // Load the model and warm the path before anything is timed.
      const t = performance.now();
      await embedder.embed(['warm up the embedding model']);
      log(`  model loaded in ${Math.round(performance.now() - t)} ms`);
    }
    const rows = [];
    let stored = 0;
    for (const checkpoint of opts.checkpoints) {
      const from = stored;
      const started = performance.now();
      let next = from;
      await Promise.all(
        Array.from({ length: opts.concurrency }, async () => {
          while (next < checkpoint) {
            const m = data[next++];
            const reply = await client.storeMemory({ workspaceId: workspace.id, content: m.content, type: m.type, tags: m.tags }, as);
            if (reply.duplicate) throw new Error(`unexpected duplicate: ${m.content}`);
          }
        }),
      );
      const seconds = (performance.now() - started) / 1000;
      stored = checkpoint;
      const perSec = (checkpoint - from) / seconds;
      if (embedder) {
        // Record the query vectors too (untimed), so the replay run has them.
        await embedder.embed(questions);
      }
      await client.queryMemories({ workspaceId: workspace.id, query: questions[0], limit: 10 }, as);
      const latencies = [];
      let hits = 0;
      for (const q of questions) {
        const t = performance.now();
        const { memories: found } = await client.queryMemories({ workspaceId: workspace.id, query: q, limit: 10 }, as);
        latencies.push(performance.now() - t);
        hits += found.length;
      }
      latencies.sort((a, b) => a - b);
      const row = {
        memories: checkpoint,
        storedThisStep: checkpoint - from,
        storePerSec: Number(perSec.toFixed(1)),
        queryP50Ms: Number(percentile(latencies, 50).toFixed(2)),
        queryP99Ms: Number(percentile(latencies, 99).toFixed(2)),
        queryMeanMs: Number((latencies.reduce((a, b) => a + b, 0) / latencies.length).toFixed(2)),
        resultsPerQuery: Number((hits / questions.length).toFixed(1)),
      };
      rows.push(row);
      log(`  ${String(checkpoint).padStart(6)} memories: store ${row.storePerSec}/s (${row.storedThisStep} stored), query p50 ${row.queryP50Ms} ms, p99 ${row.queryP99Ms} ms`);
    }
    results[label] = rows;
    client.close();
    await service.stop(1000);
  }

  const peakMiB = Math.round(peakRss / 1024 / 1024);
  const maxRssMiB = Math.round(process.resourceUsage().maxRSS / 1024);
  const included = results['embedding included'];
  const first = included[0];
  const last = included[included.length - 1];
  const storeRate = (first.storedThisStep * 1 + (last === first ? 0 : last.storedThisStep)) /
    (first.storedThisStep / first.storePerSec + (last === first ? 0 : last.storedThisStep / last.storePerSec));
  const verdicts = {
    store: storeRate >= TARGET_STORE_PER_SEC ? 'PASS' : 'BELOW TARGET',
    query: last.queryP50Ms <= TARGET_QUERY_P50_MS ? 'PASS' : 'BELOW TARGET',
  };

  log('\n                        memories   store/s   query p50   query p99');
  for (const [label, rows] of Object.entries(results)) {
    for (const r of rows) log(`  ${label.padEnd(20)} ${String(r.memories).padStart(8)} ${String(r.storePerSec).padStart(9)} ${`${r.queryP50Ms} ms`.padStart(11)} ${`${r.queryP99Ms} ms`.padStart(11)}`);
  }
  const loadAfter = loadavg()[0];
  log(`\n  peak RSS ${peakMiB} MiB (sampled), max RSS ${maxRssMiB} MiB (kernel)`);
  log(`  1-minute load average ${loadBefore.toFixed(2)} before, ${loadAfter.toFixed(2)} after, on ${cpus().length} CPUs${Math.max(loadBefore, loadAfter) > cpus().length / 2 ? ' — other work was running: figures are pessimistic' : ''}`);
  log(`  store with the built-in model: ${storeRate.toFixed(1)}/s over ${opts.memories} (target ≥ ${TARGET_STORE_PER_SEC}/s): ${verdicts.store}`);
  log(`  query p50 at ${last.memories} including embedding: ${last.queryP50Ms} ms (target ≤ ${TARGET_QUERY_P50_MS} ms): ${verdicts.query}`);

  await mkdir(RESULTS_DIR, { recursive: true });
  const report = {
    benchmark: 'memories',
    date: new Date().toISOString(),
    node: process.version,
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model,
    database: databaseUrl ? 'postgresql' : 'pglite',
    vectors: 'embedded',
    model: recording.modelId,
    embeddingThreads: threads,
    concurrency: opts.concurrency,
    queriesPerCheckpoint: opts.queries,
    results,
    storePerSecIncludingEmbedding: Number(storeRate.toFixed(1)),
    peakRssMiB: peakMiB,
    loadAverage: { before: Number(loadBefore.toFixed(2)), after: Number(loadAfter.toFixed(2)) },
    maxRssMiB,
    targets: { storePerSec: TARGET_STORE_PER_SEC, queryP50Ms: TARGET_QUERY_P50_MS },
    verdicts,
  };
  await writeFile(join(RESULTS_DIR, 'memories.json'), `${JSON.stringify(report, null, 2)}\n`);
  log(`\nResults written to ${join('bench', 'results', 'memories.json')}`);
}

main()
  .then(() => process.exit(0))
  .catch((err) => {
    console.error(`bench: FAILED: ${err?.stack ?? err}`);
    process.exit(1);
  });
