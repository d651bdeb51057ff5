#!/usr/bin/env node
// Benchmark: messaging through the whole hub (HTTP gateway → gRPC messaging → PostgreSQL, Redis
// pub/sub), against its floors measured in the same run:
//   1. the durable-send floor (bench/floor.js, shape send: Koa, a Map of keys, one loopback grpc-js
//      call, one CTE inserting task, delivery and outbox row) and an `@a2a-js/sdk` server with its
//      in-memory task store (bench/a2a.js direct-server), both under the same autocannon load;
//   2. SendMessage, non-blocking, to an agent that is not connected (each send stores a task, its
//      first event and a durable delivery): sends/s, p50, p99; then the same sends each with a new
//      messageId, as every A2A 1.0 client sends (each also reserves its idempotency key); for each,
//      the CPU per send of its processes and of PostgreSQL and Redis (from /proc);
//   3. SendMessage with blocking: true to a connected echo agent (on the SSE inbox,
//      x-hub/inbox.stream, completing each task with its message as an artifact): the round trip
//      one at a time (p50, p99) and with BENCH_BLOCKING_CONCURRENCY senders (throughput).
// Targets: non-blocking sends ≥ 1.0 of the durable-send floor (stretch: ≥ the SDK server), blocking
// p50 < 10 ms (stretch < 5 ms).
//
//   npm run build && node bench/messaging.js
//
// Settings (environment):
//   BENCH_DURATION               measured seconds per server (default 12), split over the rounds
//   BENCH_ROUNDS                 interleaved slices per server (default 3)
//   BENCH_WARMUP                 warm-up seconds before each, not measured (default 3)
//   BENCH_CONNECTIONS            autocannon connections (default 32)
//   BENCH_BLOCKING_REQUESTS      blocking round trips measured one at a time (default 300)
//   BENCH_BLOCKING_CONCURRENCY   concurrent blocking senders for the throughput run (default 16)
//   BENCH_AGENT                  stream (default): the echo agent holds x-hub/inbox.stream (SSE);
//                                poll: four x-hub/inbox.poll long-polls
//   BENCH_ONLY                   blocking: skip the non-blocking sends (and their floor), for a
//                                quick look at the blocking round trip
//   BENCH_PG_URL / BENCH_REDIS_URL / BENCH_HUB_ENV   as in the other benchmarks
//   BENCH_PROFILE                1: the hub runs with --cpu-prof; read it with bench/profile-summary.js
//   BENCH_HUB_ROOT               run the hub of another built copy of the tree (A/B a change)
// Results go to bench/results/messaging.json. Exit 0 when every run measured cleanly (PASS or
// BELOW TARGET is printed), 1 on failures, 2 when PostgreSQL or Redis is unreachable.

import { mkdir, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { cpus } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { backendTicks, cpuDuring, drainHub, envNumber, fmt, freshHubSettings, log, ownProcessTicks, parseHubEnv, percentile, processTicks, round, rpc, runBench, startHubProcess, startNodeProcess, startStreamingEchoAgent, ticksSince, TICKS_PER_SECOND } from './lib.js';

const require = createRequire(import.meta.url);
const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '..');
const TARGET_SEND_RATIO = 1.0;
const TARGET_BLOCKING_P50_MS = 10;

function settings() {
  return {
    duration: envNumber('BENCH_DURATION', 12, 1),
    rounds: Math.round(envNumber('BENCH_ROUNDS', 3, 1)),
    warmup: envNumber('BENCH_WARMUP', 3, 0),
    connections: Math.round(envNumber('BENCH_CONNECTIONS', 32, 1)),
    blockingRequests: Math.round(envNumber('BENCH_BLOCKING_REQUESTS', 300, 10)),
    blockingConcurrency: Math.round(envNumber('BENCH_BLOCKING_CONCURRENCY', 16, 1)),
    agent: process.env.BENCH_AGENT === 'poll' ? 'poll' : 'stream',
    only: process.env.BENCH_ONLY ?? '',
    hubEnv: parseHubEnv(),
    hubRoot: resolve(ROOT, process.env.BENCH_HUB_ROOT || '.'),
    profile: process.env.BENCH_PROFILE === '1',
    pgUrl: process.env.BENCH_PG_URL || 'postgres://postgres@127.0.0.1:5432/postgres',
    redisUrl: process.env.BENCH_REDIS_URL || 'redis://127.0.0.1:6379',
  };
}

/** One autocannon run against `url` with one JSON body; JSON-RPC errors count as failures. */
async function measure(label, url, headers, body, opts) {
  const autocannon = require('autocannon');
  const once = (seconds) =>
    new Promise((ok, fail) => {
      autocannon(
        {
          url,
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers },
          body,
          connections: opts.connections,
          duration: seconds,
          timeout: 10,
          idReplacement: body.includes('[<id>]'),
          verifyBody: (text) => text.startsWith('{"jsonrpc":"2.0","id":1,"result":'),
        },
        (err, result) => (err ? fail(err) : ok(result)),
      );
    });
  if (opts.warmup > 0) await once(opts.warmup);
  log(`[${label}] measuring ${opts.duration} s…`);
  const before = cpuTicks(opts.pid, opts.dbName);
  const result = await once(opts.duration);
  const after = cpuTicks(opts.pid, opts.dbName);
  const ok = result['2xx'] - result.mismatches;
  const failed = result.errors + result.timeouts + result.non2xx + result.mismatches;
  const perSend = (ticks) => (ok > 0 ? round((ticks * 1e6) / TICKS_PER_SECOND / ok, 0) : 0);
  const summary = {
    valid: failed === 0 && ok > 0,
    failed,
    sends: ok,
    perSec: round(ok / result.duration, 0),
    p50: result.latency.p50,
    p99: result.latency.p99,
    serverCpuUs: perSend(after.server - before.server),
    childCpuUs: perSend(after.children - before.children),
    dataCpuUs: perSend(ticksSince(before.data, after.data)),
  };
  log(`[${label}] ${summary.valid ? `${fmt(summary.perSec)} req/s, p50 ${summary.p50} ms, p99 ${summary.p99} ms; ${cpuText(summary)}` : `INVALID RUN: ${failed} failed`}`);
  return summary;
}

/**
 * Clock ticks of the server's processes (and of its child processes alone: the hub's gateway), and
 * of the database's PostgreSQL backends and Redis by pid.
 */
function cpuTicks(pid, dbName) {
  const server = processTicks(pid);
  return { server, children: server - ownProcessTicks(pid), data: backendTicks(dbName, { redis: true }) };
}

/** A target's CPU per send, as the slices and the summary print it. */
function cpuText(x) {
  const children = x.childCpuUs > 0 ? ` (${x.childCpuUs} µs in its child process)` : '';
  return `CPU per send: server ${x.serverCpuUs} µs${children}, PostgreSQL and Redis ${x.dataCpuUs} µs`;
}

/** Slices of one target as one figure: summed rate, the median slice's p50, the worst p99. */
function combine(slices) {
  const p50s = slices.map((x) => x.p50).sort((x, y) => x - y);
  const sends = slices.reduce((n, x) => n + x.sends, 0);
  const cpuUs = (field) => (sends > 0 ? round(slices.reduce((n, x) => n + x[field] * x.sends, 0) / sends, 0) : 0);
  return {
    valid: slices.every((x) => x.valid),
    failed: slices.reduce((n, x) => n + x.failed, 0),
    perSec: round(slices.reduce((n, x) => n + x.perSec, 0) / slices.length, 0),
    p50: p50s[Math.floor(p50s.length / 2)],
    p99: Math.max(...slices.map((x) => x.p99)),
    slices: slices.map((x) => x.perSec),
    serverCpuUs: cpuUs('serverCpuUs'),
    childCpuUs: cpuUs('childCpuUs'),
    dataCpuUs: cpuUs('dataCpuUs'),
  };
}

/**
 * A connected echo agent: `pollers` long-polls of its inbox; each delivery's task is completed with
 * the delivered parts as an artifact (which removes the delivery: no ack).
 */
function startEchoAgent(hubUrl, apiKey, pollers) {
  let running = true;
  let failures = 0;
  const loop = async () => {
    while (running) {
      const polled = await rpc(hubUrl, '/a2a', apiKey, 'x-hub/inbox.poll', { wait_ms: 1000, max: 50 });
      if (polled.error) {
        failures += 1;
        continue;
      }
      await Promise.all(
        polled.result.deliveries.map(async (d) => {
          const done = await rpc(hubUrl, '/a2a', apiKey, 'x-hub/tasks.update', {
            task_id: d.task_id,
            state: 'completed',
            artifacts: [{ name: 'echo', parts: d.message.parts }],
          });
          // Completing the task removes its delivery: no ack needed.
          if (done.error) failures += 1;
        }),
      );
    }
  };
  const loops = Array.from({ length: pollers }, loop);
  return {
    failures: () => failures,
    stop: async () => {
      running = false;
      await Promise.all(loops);
    },
  };
}

async function blockingSend(hubUrl, apiKey, to, text) {
  const started = process.hrtime.bigint();
  const reply = await rpc(hubUrl, '/a2a', apiKey, 'SendMessage', {
    message: { role: 'user', parts: [{ kind: 'text', text }] },
    configuration: { agentId: to, blocking: true },
  });
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  const ok = reply.result?.status?.state === 'completed' && reply.result.artifacts?.[0]?.parts?.[0]?.text === text;
  return { ms, ok };
}

/** `senders` blocking senders back to back for `seconds`: round trips a second, p50 and p99. */
async function blockingLoad(hubUrl, apiKey, to, senders, seconds, tag) {
  const until = Date.now() + seconds * 1000;
  const latencies = [];
  let failed = 0;
  const startedAt = Date.now();
  await Promise.all(
    Array.from({ length: senders }, async (_, s) => {
      for (let i = 0; Date.now() < until; i += 1) {
        const r = await blockingSend(hubUrl, apiKey, to, `${tag}${s}-${i}`);
        if (r.ok) latencies.push(r.ms);
        else failed += 1;
      }
    }),
  );
  latencies.sort((a, b) => a - b);
  return {
    valid: failed === 0,
    failed,
    perSec: round(latencies.length / ((Date.now() - startedAt) / 1000), 0),
    p50: round(percentile(latencies, 50), 2),
    p99: round(percentile(latencies, 99), 2),
  };
}

async function run(cleanups) {
  const opts = settings();
  log('AgentHub benchmark: SendMessage (non-blocking and blocking to a connected echo agent) vs the durable-send floor and an @a2a-js/sdk server, same run');
  log(`  ${opts.connections} connections, ${opts.warmup} s warm-up + ${opts.duration} s measured per autocannon run; node ${process.version}, ${cpus().length} CPUs`);
  const { id, adminToken, env } = await freshHubSettings(cleanups, opts);
  const profileDir = join(HERE, 'results', 'profiles');
  if (opts.profile) await mkdir(profileDir, { recursive: true });
  const hub = await startHubProcess(opts.hubRoot, { ...env, HUB_ADMIN_TOKEN: adminToken, ...opts.hubEnv }, opts.profile ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`, `--cpu-prof-name=messaging-hub-${id}.cpuprofile`] : []);
  if (opts.profile) log(`  CPU profile of the hub: bench/results/profiles/messaging-hub-${id}.cpuprofile (written when it exits; times below are ms since it started)`);
  cleanups.push(() => hub.stop());
  log(`  hub up at ${hub.url} on PostgreSQL and Redis`);

  const agent = async (name) => {
    const created = await rpc(hub.url, '/admin', adminToken, 'agents.create', { tenant_id: `bench-${id}`, name, create_tenant: true });
    if (created.error) throw new Error(`agents.create failed: ${JSON.stringify(created.error)}`);
    return { agentId: created.result.agent.id, apiKey: created.result.api_key };
  };
  const sender = await agent('sender');
  const queue = await agent('offline recipient');
  const echoer = await agent('echo agent');

  const sendBodyWith = (message) =>
    JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'SendMessage',
      params: { message: { ...message, role: 'user', parts: [{ kind: 'text', text: 'benchmark message' }] }, configuration: { agentId: queue.agentId } },
    });
  const sendBody = sendBodyWith({});
  // autocannon puts a new id in place of [<id>] in every request.
  const keyedBody = sendBodyWith({ messageId: '[<id>]' });
  const doSends = opts.only !== 'blocking';
  const doBlocking = opts.only !== 'sends';
  const floorProcess = !doSends ? undefined : await startNodeProcess(cleanups, ROOT, [join(HERE, 'floor.js')], { FLOOR_SHAPE: 'send', FLOOR_PG_URL: env.DATABASE_URL, FLOOR_KEYS: JSON.stringify({ [sender.apiKey]: sender.agentId }) }, /FLOOR listening on (\S+)/);
  const sdkProcess = !doSends ? undefined : await startNodeProcess(cleanups, ROOT, [join(HERE, 'a2a.js'), 'direct-server'], {}, /listening on (\S+)/);
  // The SDK server speaks A2A 1.0 only; its request is the same send in that dialect.
  const sdkBody = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: 'bench', role: 'ROLE_USER', parts: [{ text: 'benchmark message' }] } } });
  // Interleaved in BENCH_ROUNDS slices (floor, hub, SDK server, floor, …), so a change in the
  // machine's load during the run hits all three alike; each figure sums its slices.
  const targets = !doSends ? [] : [
    ['durable-send floor', floorProcess.match[1], { authorization: `Bearer ${sender.apiKey}` }, sendBody, floorProcess.pid],
    ['SendMessage non-blocking', `${hub.url}/a2a`, { authorization: `Bearer ${sender.apiKey}` }, sendBody, hub.pid],
    ['@a2a-js/sdk server (in memory)', `${sdkProcess.match[1]}/a2a`, { 'a2a-version': '1.0' }, sdkBody, sdkProcess.pid],
    ['SendMessage non-blocking, with messageId', `${hub.url}/a2a`, { authorization: `Bearer ${sender.apiKey}` }, keyedBody, hub.pid],
  ];
  const dbName = new URL(env.DATABASE_URL).pathname.slice(1);
  const slices = targets.map(() => []);
  const sendsFrom = Math.round(performance.now() - hub.startedAt);
  for (let round = 0; round < opts.rounds; round += 1) {
    for (const [i, [label, url, headers, body, pid]] of targets.entries()) {
      slices[i].push(await measure(label, url, headers, body, { ...opts, pid, dbName, warmup: round === 0 ? opts.warmup : 0, duration: opts.duration / opts.rounds }));
      if (pid === hub.pid) {
        const left = await drainHub(env.DATABASE_URL);
        log(`[${label}] left behind: ${left.outbox} outbox events, ${left.log} event log messages; handled in ${left.seconds} s`);
      }
    }
  }
  const [floor, sends, sdk, keyed] = doSends ? slices.map(combine) : [];
  if (opts.profile && doSends) log(`  profile window of the non-blocking sends (all rounds, with the floor and SDK slices between): --from ${sendsFrom} --to ${Math.round(performance.now() - hub.startedAt)}`);

  let single;
  let concurrent;
  let echoFailures = 0;
  if (doBlocking) {
    const blockingFrom = Math.round(performance.now() - hub.startedAt);
    const echoAgent = opts.agent === 'poll' ? startEchoAgent(hub.url, echoer.apiKey, 4) : await startStreamingEchoAgent(hub.url, echoer.apiKey, 16);
    cleanups.push(() => echoAgent.stop());
    const warm = await blockingSend(hub.url, sender.apiKey, echoer.agentId, 'warm');
    if (!warm.ok) throw new Error('a blocking send to the echo agent did not come back completed with its echo');
    // As autocannon's warm-up does for the other paths: the hub's code on this path is compiled
    // and optimized before anything is measured (20 sends one at a time left much of it cold).
    if (opts.warmup > 0) {
      log(`[blocking] warming up for ${opts.warmup} s with ${opts.blockingConcurrency} senders…`);
      const warmed = await blockingLoad(hub.url, sender.apiKey, echoer.agentId, opts.blockingConcurrency, opts.warmup, 'warm');
      if (warmed.failed > 0) throw new Error(`${warmed.failed} blocking sends failed while warming up`);
    }
    log(`[blocking round trip] ${opts.blockingRequests} sends one at a time…`);
    const latencies = [];
    let blockingFailed = 0;
    const cpu = await cpuDuring(hub.pid, new URL(env.DATABASE_URL).pathname.slice(1), async () => {
      for (let i = 0; i < opts.blockingRequests; i += 1) {
        const r = await blockingSend(hub.url, sender.apiKey, echoer.agentId, `m${i}`);
        if (r.ok) latencies.push(r.ms);
        else blockingFailed += 1;
      }
    });
    latencies.sort((a, b) => a - b);
    single = {
      valid: blockingFailed === 0,
      failed: blockingFailed,
      p50: round(percentile(latencies, 50), 2),
      p99: round(percentile(latencies, 99), 2),
      hubCpuMs: round(cpu.hubMs / opts.blockingRequests, 2),
      pgCpuMs: round(cpu.pgMs / opts.blockingRequests, 2),
    };
    log(`[blocking round trip] p50 ${single.p50} ms, p99 ${single.p99} ms, ${blockingFailed} failed; CPU per round trip: hub ${single.hubCpuMs} ms, PostgreSQL ${single.pgCpuMs} ms`);

    log(`[blocking, ${opts.blockingConcurrency} senders] measuring ${opts.duration} s…`);
    concurrent = await blockingLoad(hub.url, sender.apiKey, echoer.agentId, opts.blockingConcurrency, opts.duration, 'c');
    log(`[blocking, ${opts.blockingConcurrency} senders] ${fmt(concurrent.perSec)} round trips/s, p50 ${concurrent.p50} ms, p99 ${concurrent.p99} ms, ${concurrent.failed} failed`);
    await echoAgent.stop();
    echoFailures = echoAgent.failures();
    if (echoFailures) log(`  the echo agent saw ${echoFailures} failed calls`);
    if (opts.profile) log(`  profile window of the blocking round trips: --from ${blockingFrom} --to ${Math.round(performance.now() - hub.startedAt)}`);
  }

  const valid = (!doSends || (floor.valid && sdk.valid && sends.valid && keyed.valid)) && (!doBlocking || (single.valid && concurrent.valid && echoFailures === 0));
  const verdict = (ok) => (ok ? 'PASS' : 'BELOW TARGET');
  log('');
  const sendRatio = doSends ? sends.perSec / floor.perSec : undefined;
  if (doSends) {
    log(`durable-send floor            ${fmt(floor.perSec)} sends/s, p50 ${floor.p50} ms (slices ${floor.slices.join(', ')}); ${cpuText(floor)}`);
    log(`@a2a-js/sdk server (memory)   ${fmt(sdk.perSec)} sends/s, p50 ${sdk.p50} ms (slices ${sdk.slices.join(', ')}); ${cpuText(sdk)}`);
    log(`SendMessage non-blocking      ${fmt(sends.perSec)} sends/s, p50 ${sends.p50} ms (slices ${sends.slices.join(', ')}); ${cpuText(sends)}`);
    log(`                              ${sendRatio.toFixed(3)} of the floor (target ≥ ${TARGET_SEND_RATIO}) ${verdict(sendRatio >= TARGET_SEND_RATIO)}; ${(sends.perSec / sdk.perSec).toFixed(3)} of the SDK server (stretch ≥ 1) ${verdict(sends.perSec >= sdk.perSec)}`);
    log(`  with messageId              ${fmt(keyed.perSec)} sends/s, p50 ${keyed.p50} ms (slices ${keyed.slices.join(', ')}); ${cpuText(keyed)}`);
    log(`                              ${(keyed.perSec / floor.perSec).toFixed(3)} of the floor, ${(keyed.perSec / sends.perSec).toFixed(3)} of the sends without one`);
  }
  if (doBlocking) {
    log(`blocking round trip (single)  p50 ${single.p50} ms, p99 ${single.p99} ms   target p50 < ${TARGET_BLOCKING_P50_MS} ms   ${verdict(single.p50 < TARGET_BLOCKING_P50_MS)}   CPU/round trip: hub ${single.hubCpuMs} ms, PostgreSQL ${single.pgCpuMs} ms`);
    log(`blocking round trips (${opts.blockingConcurrency})     ${fmt(concurrent.perSec)}/s, p50 ${concurrent.p50} ms, p99 ${concurrent.p99} ms`);
  }

  const report = {
    benchmark: 'messaging',
    date: new Date().toISOString(),
    node: process.version,
    cpus: cpus().length,
    settings: { ...opts, pgUrl: undefined, redisUrl: undefined, hubRoot: undefined },
    floor,
    sdk,
    nonBlocking: sends,
    nonBlockingRatio: round(sendRatio, 3),
    nonBlockingWithMessageId: keyed,
    blockingSingle: single,
    blockingConcurrent: concurrent,
    targets: { sendRatio: TARGET_SEND_RATIO, blockingP50Ms: TARGET_BLOCKING_P50_MS },
  };
  await mkdir(join(HERE, 'results'), { recursive: true });
  await writeFile(join(HERE, 'results', 'messaging.json'), `${JSON.stringify(report, null, 2)}\n`);
  log(`Results written to ${join('bench', 'results', 'messaging.json')}`);
  if (!valid) for (const l of hub.logTail()) console.error(`  hub log: ${l}`);
  return valid ? 0 : 1;
}

await runBench(run);
