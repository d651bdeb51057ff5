#!/usr/bin/env node
// Benchmark: webhook delivery through the whole hub (JSON-RPC call → service transaction with its
// outbox row → outbox relay → event log → events service → signed HTTP POST) to a receiver in
// this process, on real PostgreSQL and Redis.
//
//   1. Latency at a low rate: one `x-hub/workspace.store` at a time; the time from the call
//      returning to its `workspace.memory.stored` webhook arriving (p50, p99), and from the call
//      being sent. The next store waits for the previous webhook plus a pause.
//   2. Throughput: bursts of `x-hub/workspace.secrets.set` calls from BENCH_CONCURRENCY callers
//      over BENCH_WORKSPACES workspaces (one webhook each, same receiver); events/s delivered,
//      counted as distinct webhook-ids, with zero loss required. Twice:
//      - live: webhooks go out while the calls come in (end to end: bound by the slowest stage,
//        the calls or the intake, both printed);
//      - backlog: the receiver holds each endpoint's first request while the calls come in; once
//        the hub has queued every event (pending rows in events.deliveries) it answers, and the
//        time to deliver the queued backlog measures delivery alone. The intake (outbox → relay →
//        event log → delivery rows) is timed on its own: events/s queued from the first call, and
//        how long after the last call the last event was queued.
//      Secrets, not memories: storing a memory embeds its text (CPU-bound, about 100/s on 2
//      cores, see bench/memories.js), which would measure the embedding model, not delivery.
//
//   npm run build && node bench/webhooks.js
//   npm run bench:events                  (after a build)
//
// Settings (environment):
//   BENCH_LATENCY_EVENTS   stores timed one at a time (default 200)
//   BENCH_LATENCY_PAUSE_MS pause between them (default 20)
//   BENCH_BURST            secrets.set calls in the burst (default 5000)
//   BENCH_CONCURRENCY      concurrent callers in the burst (default 32)
//   BENCH_WORKSPACES       workspaces (one webhook each) the burst is spread over (default 8)
//   BENCH_DRAIN_S          longest wait for the last webhooks after the burst (default 120)
//   BENCH_PG_URL           PostgreSQL admin URL (default postgres://postgres@127.0.0.1:5432/postgres)
//   BENCH_REDIS_URL        Redis URL (default redis://127.0.0.1:6379)
//   BENCH_HUB_ENV          extra hub settings, "NAME=value NAME=value"
//   BENCH_KAFKA_BROKERS    host:port,…: after the embedded log (schema `bus`), the same measurement
//                          with the event log on these Kafka brokers (KAFKA_BROKERS), on a fresh
//                          database, and both side by side (`bash .ci/kafka.sh start` gives one)
//   BENCH_PROFILE          1: run the hub with --cpu-prof into bench/results/profiles/
//
// Targets on a 2-core machine: p50 from the store returning to the webhook < 100 ms; ≥ 500
// events/s delivered with zero loss. Every webhook's signature is verified (Standard Webhooks,
// node:crypto). Results go to bench/results/webhooks.json.
// Exit status: 0 when both parts ran cleanly, whatever the figures (PASS or BELOW TARGET is
// printed); 1 when an event was not delivered within BENCH_DRAIN_S, a signature did not verify, a call failed or setup failed;
// 2 when PostgreSQL or Redis is unreachable.

import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { cpus, loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { createAgentKey, fmt, freshHubSettings, log, okRpc, parseHubEnv, percentile, round, rpc, runBench, startHubProcess, startReceiver, UsageError } from './lib.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '..');
const RESULTS_DIR = join(HERE, 'results');
const TARGET_P50_MS = 100;
const TARGET_EVENTS_PER_SEC = 500;
const SECRET_KEYS = 100;

function settings() {
  const number = (name, fallback, min) => {
    const raw = process.env[name];
    if (raw === undefined || raw === '') return fallback;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < min) throw new UsageError(`${name} must be an integer ≥ ${min} (got "${raw}")`);
    return value;
  };
  const hubEnv = parseHubEnv();
  return {
    latencyEvents: number('BENCH_LATENCY_EVENTS', 200, 10),
    pauseMs: number('BENCH_LATENCY_PAUSE_MS', 20, 0),
    burst: number('BENCH_BURST', 5000, 10),
    concurrency: number('BENCH_CONCURRENCY', 32, 1),
    workspaces: number('BENCH_WORKSPACES', 8, 1),
    drainSeconds: number('BENCH_DRAIN_S', 120, 1),
    hubEnv,
    // The embedded log always; Kafka beside it when BENCH_KAFKA_BROKERS names brokers.
    eventLogs: [['embedded log', {}], ...(process.env.BENCH_KAFKA_BROKERS ? [['Kafka', { KAFKA_BROKERS: process.env.BENCH_KAFKA_BROKERS }]] : [])],
    profile: process.env.BENCH_PROFILE === '1',
    pgUrl: process.env.BENCH_PG_URL || 'postgres://postgres@127.0.0.1:5432/postgres',
    redisUrl: process.env.BENCH_REDIS_URL || 'redis://127.0.0.1:6379',
  };
}

async function run(cleanups) {
  const opts = settings();
  log('AgentHub benchmark: webhooks (store/set → outbox → event log → events service → signed POST)');
  log(`  node ${process.version}, ${cpus().length} CPUs; latency: ${opts.latencyEvents} memory stores one at a time; burst: ${fmt(opts.burst)} secrets.set, ${opts.concurrency} callers, ${opts.workspaces} workspace(s)`);
  log(`  event log(s), one after the other on fresh databases: ${opts.eventLogs.map(([name]) => name).join(', ')}`);
  const runs = [];
  for (const [eventLog, busEnv] of opts.eventLogs) {
    log(`\n===== event log: ${eventLog} =====`);
    runs.push(await measure(cleanups, opts, eventLog, busEnv));
  }
  if (runs.length > 1) {
    log('\n  side by side (same run, same settings):');
    log('  event log        latency p50 / p99 (ms)   live events/s   backlog events/s   intake events/s   lost   duplicates');
    for (const r of runs) {
      log(`  ${r.eventLog.padEnd(16)} ${`${r.latency.p50Ms} / ${r.latency.p99Ms}`.padEnd(24)} ${String(r.burst.live.eventsPerSec).padEnd(15)} ${String(r.burst.backlog.eventsPerSec).padEnd(18)} ${String(r.burst.backlog.intakeEventsPerSec).padEnd(17)} ${String(r.burst.live.lost + r.burst.backlog.lost).padEnd(6)} ${r.burst.live.duplicates + r.burst.backlog.duplicates}`);
    }
  }
  await mkdir(RESULTS_DIR, { recursive: true });
  // One event log: the report as before; with Kafka beside it, one report per event log.
  const report = {
    benchmark: 'webhooks',
    date: new Date().toISOString(),
    node: process.version,
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model,
    database: 'postgresql',
    settings: { ...opts, pgUrl: undefined, redisUrl: undefined, eventLogs: opts.eventLogs.map(([name]) => name) },
    targets: { p50Ms: TARGET_P50_MS, eventsPerSec: TARGET_EVENTS_PER_SEC },
    ...(runs.length === 1 ? runs[0] : { runs }),
  };
  await writeFile(join(RESULTS_DIR, 'webhooks.json'), `${JSON.stringify(report, null, 2)}\n`);
  log(`\nResults written to ${join('bench', 'results', 'webhooks.json')}`);
  return runs.every((r) => r.clean) ? 0 : 1;
}

/** The whole measurement on one event log (`busEnv`: the hub settings that choose it), on a fresh database. */
async function measure(outerCleanups, opts, eventLog, busEnv) {
  // This run's hub and receiver stop before the next event log's run starts.
  const cleanups = [];
  outerCleanups.push(async () => {
    while (cleanups.length) await cleanups.pop()();
  });
  const loadBefore = loadavg()[0];
  const pg = (await import('pg')).default;
  const { id, adminToken, env } = await freshHubSettings(outerCleanups, opts);
  const databaseUrl = env.DATABASE_URL;
  log(`  database ${new URL(databaseUrl).pathname.slice(1)}, Redis prefix ${env.REDIS_PREFIX}`);

  const receiver = await startReceiver();
  cleanups.push(() => receiver.close());

  const hub = await startHubProcess(ROOT, {
    ...env,
    HUB_ADMIN_TOKEN: adminToken,
    // The receiver is on 127.0.0.1: loopback targets must be allowed explicitly.
    HUB_EGRESS_ALLOW_PRIVATE: 'true',
    // The backlog part holds requests unanswered while its calls run: no attempt may time out.
    WEBHOOK_TIMEOUT_MS: '300000',
    ...busEnv,
    ...opts.hubEnv,
  }, opts.profile ? ['--cpu-prof', `--cpu-prof-dir=${join(RESULTS_DIR, 'profiles')}`] : []);
  cleanups.push(() => hub.stop());
  log(`  hub up at ${hub.url}, receiver at ${receiver.url('/')}`);

  const call = (key, method, params) => okRpc(hub.url, key, method, params);
  const apiKey = await createAgentKey(hub.url, adminToken, `bench-${id}`, 'bench agent');
  const subscribe = async (workspaceId, path, events) =>
    (await call(apiKey, 'x-hub/webhooks.create', { workspace_id: workspaceId, url: receiver.url(path), events })).webhook;

  // ---- 1. latency at a low rate ------------------------------------------------------------
  const latencyWs = (await call(apiKey, 'x-hub/workspace.create', { name: 'bench latency' })).workspace.id;
  const latencyHook = await subscribe(latencyWs, '/latency', ['workspace.memory.stored']);
  receiver.secrets.set('/latency', latencyHook.secret);
  // Warm-up (model load, connections, first deliveries), not timed.
  for (let i = 0; i < 5; i += 1) {
    const { memory } = await call(apiKey, 'x-hub/workspace.store', { workspace_id: latencyWs, content: `Warm-up note ${i} ${id}.` });
    await receiver.arrival('/latency', (body) => body.data?.memory_id === memory.id, 60_000);
  }
  log(`\n[latency] ${opts.latencyEvents} stores, one at a time, ${opts.pauseMs} ms apart…`);
  const afterReturn = [];
  const afterSend = [];
  for (let i = 0; i < opts.latencyEvents; i += 1) {
    const sent = performance.now();
    const { memory } = await call(apiKey, 'x-hub/workspace.store', { workspace_id: latencyWs, content: `Latency probe ${i} of run ${id}: the launch moved to week ${i % 52}.` });
    const returned = performance.now();
    const arrived = await receiver.arrival('/latency', (body) => body.data?.memory_id === memory.id, 30_000);
    // The webhook can arrive before the HTTP reply does: that counts as 0.
    afterReturn.push(Math.max(0, arrived - returned));
    afterSend.push(arrived - sent);
    if (opts.pauseMs) await sleep(opts.pauseMs);
  }
  afterReturn.sort((a, b) => a - b);
  afterSend.sort((a, b) => a - b);
  const latency = {
    events: opts.latencyEvents,
    p50Ms: round(percentile(afterReturn, 50), 2),
    p99Ms: round(percentile(afterReturn, 99), 2),
    maxMs: round(afterReturn.at(-1), 2),
    fromSendP50Ms: round(percentile(afterSend, 50), 2),
    fromSendP99Ms: round(percentile(afterSend, 99), 2),
  };
  log(`[latency] store returned → webhook arrived: p50 ${latency.p50Ms} ms, p99 ${latency.p99Ms} ms, max ${latency.maxMs} ms`);
  log(`[latency] store sent → webhook arrived:     p50 ${latency.fromSendP50Ms} ms, p99 ${latency.fromSendP99Ms} ms`);

  // ---- 2. throughput over a burst -----------------------------------------------------------
  const burstPaths = [];
  const workspaceIds = [];
  for (let w = 0; w < opts.workspaces; w += 1) {
    const workspaceId = (await call(apiKey, 'x-hub/workspace.create', { name: `bench burst ${w}` })).workspace.id;
    const path = `/burst/${w}`;
    const hook = await subscribe(workspaceId, path, ['workspace.secret.set']);
    receiver.secrets.set(path, hook.secret);
    workspaceIds.push(workspaceId);
    burstPaths.push(path);
  }
  const value = randomBytes(24).toString('base64');
  let burstRound = 0;
  /** One burst of `opts.burst` calls; resolves when the calls returned. */
  const sendBurst = async () => {
    burstRound += 1;
    let next = 0;
    let failed = 0;
    await Promise.all(
      Array.from({ length: opts.concurrency }, async () => {
        while (next < opts.burst) {
          const n = next++;
          const w = n % opts.workspaces;
          const key = `BURST_${burstRound}_${Math.floor(n / opts.workspaces) % SECRET_KEYS}`;
          const reply = await rpc(hub.url, '/a2a', apiKey, 'x-hub/workspace.secrets.set', { workspace_id: workspaceIds[w], key, value });
          if (reply.error || !reply.result) failed += 1;
        }
      }),
    );
    return failed;
  };
  const distinctArrived = () => burstPaths.reduce((sum, path) => sum + receiver.distinct(path), 0);
  const requestsArrived = () => burstPaths.reduce((sum, path) => sum + receiver.count(path), 0);
  const lastArrival = () => Math.max(...burstPaths.map((path) => receiver.lastArrival(path)));
  /** Waits (at most BENCH_DRAIN_S) until `total` distinct webhook-ids arrived on the burst paths. */
  const drain = async (total) => {
    const deadline = performance.now() + opts.drainSeconds * 1000;
    while (distinctArrived() < total && performance.now() < deadline) await sleep(20);
    return distinctArrived();
  };

  /** Waits (at most BENCH_DRAIN_S) until the hub holds `total` pending deliveries; whether it did. */
  const waitQueued = async (total) => {
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    try {
      const deadline = performance.now() + opts.drainSeconds * 1000;
      const pending = async () =>
        (await db.query("SELECT count(*)::int AS n FROM events.deliveries WHERE status = 'pending'")).rows[0].n;
      while ((await pending()) < total) {
        if (performance.now() >= deadline) return false;
        await sleep(20);
      }
      return true;
    } finally {
      await db.end();
    }
  };

  // 2a. Live: webhooks go out while the calls come in; bound by whichever side is slower.
  log(`\n[burst, live] ${fmt(opts.burst)} x-hub/workspace.secrets.set (no embedding) from ${opts.concurrency} callers over ${opts.workspaces} workspace(s)…`);
  const liveStart = performance.now();
  const liveFailed = await sendBurst();
  const liveCallsDone = performance.now();
  const liveAccepted = opts.burst - liveFailed;
  const liveDelivered = await drain(liveAccepted);
  const liveLast = lastArrival();
  const live = {
    event: 'workspace.secret.set',
    calls: opts.burst,
    failedCalls: liveFailed,
    delivered: liveDelivered,
    lost: liveAccepted - liveDelivered,
    duplicates: requestsArrived() - liveDelivered,
    callsPerSec: round(liveAccepted / ((liveCallsDone - liveStart) / 1000), 0),
    eventsPerSec: liveDelivered > 0 ? round(liveDelivered / ((liveLast - liveStart) / 1000), 0) : 0,
    lagAfterLastCallMs: round(liveLast - liveCallsDone, 0),
  };
  log(`[burst, live] calls accepted ${fmt(liveAccepted)} at ${fmt(live.callsPerSec)}/s; ${fmt(liveDelivered)} distinct webhook-ids delivered in ${((liveLast - liveStart) / 1000).toFixed(2)} s → ${fmt(live.eventsPerSec)} events/s`);
  log(`[burst, live] undelivered after the drain wait ${live.lost}, duplicate requests ${live.duplicates}, failed calls ${liveFailed}, last webhook ${fmt(live.lagAfterLastCallMs)} ms after the last call returned`);

  // 2b. Backlog: the receiver holds each endpoint's first request unanswered while the calls
  // come in, so the events queue up in the hub (one delivery at a time per endpoint); once all
  // are queued it answers, and the time to deliver the whole backlog measures delivery alone.
  const before = { distinct: distinctArrived(), requests: requestsArrived() };
  receiver.hold(burstPaths);
  log(`[burst, backlog] ${fmt(opts.burst)} more calls while the receiver holds each endpoint's first request…`);
  const backlogStart = performance.now();
  const backlogFailed = await sendBurst();
  const backlogCallsDone = performance.now();
  const backlogAccepted = opts.burst - backlogFailed;
  // Release only once the hub has queued every event (outbox → relay → event log → delivery
  // rows), so the drain measures delivery alone; intake is timed on its own.
  const queuedAll = await waitQueued(backlogAccepted);
  const released = performance.now();
  receiver.release();
  const backlogDelivered = (await drain(before.distinct + backlogAccepted)) - before.distinct;
  const backlogLast = lastArrival();
  const backlog = {
    event: 'workspace.secret.set',
    calls: opts.burst,
    failedCalls: backlogFailed,
    delivered: backlogDelivered,
    lost: backlogAccepted - backlogDelivered,
    duplicates: requestsArrived() - before.requests - backlogDelivered,
    eventsPerSec: backlogDelivered > 0 ? round(backlogDelivered / ((backlogLast - released) / 1000), 0) : 0,
    intakeEventsPerSec: queuedAll ? round(backlogAccepted / ((released - backlogStart) / 1000), 0) : 0,
    intakeLagAfterLastCallMs: round(released - backlogCallsDone, 0),
  };
  log(`[burst, backlog] intake: ${queuedAll ? `every event queued for delivery ${fmt(backlog.intakeLagAfterLastCallMs)} ms after the last call returned (${fmt(backlog.intakeEventsPerSec)} events/s from the first call)` : `not every event was queued within ${opts.drainSeconds} s; released anyway`}`);
  log(`[burst, backlog] ${fmt(backlogDelivered)} distinct webhook-ids delivered ${((backlogLast - released) / 1000).toFixed(2)} s after the release → ${fmt(backlog.eventsPerSec)} events/s`);
  log(`[burst, backlog] undelivered after the drain wait ${backlog.lost}, duplicate requests ${backlog.duplicates}, failed calls ${backlogFailed}`);
  if (backlog.lost > 0) log(`[burst, backlog] distinct webhook-ids per endpoint: ${burstPaths.map((path) => `${path} ${receiver.distinct(path)}`).join(', ')}`);

  const badSignatures = receiver.badSignatures();
  const loadAfter = loadavg()[0];
  const failedCalls = liveFailed + backlogFailed;
  const lost = live.lost + backlog.lost;
  const clean = lost === 0 && failedCalls === 0 && badSignatures === 0;
  const verdict = (rate) => (!clean ? 'INVALID' : rate >= TARGET_EVENTS_PER_SEC ? 'PASS' : 'BELOW TARGET');
  const verdicts = {
    latency: latency.p50Ms < TARGET_P50_MS ? 'PASS' : 'BELOW TARGET',
    throughputLive: verdict(live.eventsPerSec),
    throughputBacklog: verdict(backlog.eventsPerSec),
  };
  log('');
  log(`  signatures verified: ${fmt(receiver.verified())}, bad: ${badSignatures}`);
  log(`  1-minute load average ${loadBefore.toFixed(2)} before, ${loadAfter.toFixed(2)} after, on ${cpus().length} CPUs${Math.max(loadBefore, loadAfter) > cpus().length / 2 ? ' — other work was running: figures are pessimistic' : ''}`);
  log(`  latency p50 (store returned → webhook) ${latency.p50Ms} ms, p99 ${latency.p99Ms} ms   target p50 < ${TARGET_P50_MS} ms   ${verdicts.latency}`);
  log(`  throughput, live (end to end; calls accepted ${fmt(live.callsPerSec)}/s, intake ${fmt(backlog.intakeEventsPerSec)}/s in the backlog part) ${fmt(live.eventsPerSec)} events/s, ${live.lost} undelivered   target ≥ ${TARGET_EVENTS_PER_SEC}/s, zero loss   ${verdicts.throughputLive}`);
  log(`  throughput, backlog (delivery alone) ${fmt(backlog.eventsPerSec)} events/s, ${backlog.lost} undelivered   target ≥ ${TARGET_EVENTS_PER_SEC}/s, zero loss   ${verdicts.throughputBacklog}`);
  log('  (throughput measured with workspace.secret.set events: memory stores are bound by embedding, not delivery)');

  if (opts.profile) {
    // Profile time starts about when the process did.
    const at = (t) => Math.round(t - hub.startedAt);
    log(`  profiles in ${join('bench', 'results', 'profiles')} once the hub stopped; windows (profile ms):`);
    log(`    live burst: node bench/profile-summary.js <file> --from ${at(liveStart)} --to ${at(liveLast)} --per-request ${liveDelivered}`);
    log(`    backlog delivery: node bench/profile-summary.js <file> --from ${at(released)} --to ${at(backlogLast)} --per-request ${backlogDelivered}`);
  }

  if (!clean) for (const line of hub.logTail()) console.error(`  hub log: ${line}`);
  const result = {
    eventLog,
    latency,
    burst: { live, backlog },
    signatures: { verified: receiver.verified(), bad: badSignatures },
    loadAverage: { before: round(loadBefore, 2), after: round(loadAfter, 2) },
    verdicts,
    clean,
  };
  while (cleanups.length) await cleanups.pop()();
  return result;
}

function sleep(ms) {
  return new Promise((ok) => setTimeout(ok, ms));
}

await runBench(run);
