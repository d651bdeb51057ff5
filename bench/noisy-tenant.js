#!/usr/bin/env node
// Benchmark: a quiet tenant's latency while a noisy tenant sends at 10× its rate, with and without
// rate limits. One hub (`serve all` on PostgreSQL and Redis, as a child process); both tenants
// call `x-hub/workspace.get` on a workspace of their own, open-loop at fixed rates:
//   1. solo:            the quiet tenant alone;
//   2. with limits:     quiet + noisy, the noisy tenant held to BENCH_NOISY_LIMIT calls a second
//                       (`tenants.set_limits`); its excess is refused with 429 before any lookup;
//                       phases 1 and 2 take turns (BENCH_ROUNDS each), sharing their seconds;
//                       each turn with the noisy tenant starts its load BENCH_NOISY_LEAD seconds
//                       before the quiet tenant's measured calls, so that what is measured is a
//                       tenant noisy all along (its burst allowance spent, its sender running),
//                       not a full bucket at every turn; the lead-in's quiet calls are reported
//                       apart;
//   3. without limits:  quiet + noisy, the noisy tenant's limits turned off (override, rate 0);
//                       last, so that the backlog it leaves behind weighs on no other phase.
// Prints the quiet tenant's p50/p99 per phase and the ratios to its solo p99; the target is
// p99 (with limits) ≤ 1.5 × p99 (solo). Then webhooks: the quiet tenant's workspace has one
// webhook to a prompt receiver; the noisy tenant's three workspaces have 20 webhooks each to a
// tarpit that never answers (each attempt hangs until WEBHOOK_TIMEOUT_MS). Both cause events
// (a member added, then removed) at BENCH_WEBHOOK_RATE and 10× that; the quiet tenant's
// event-to-delivery p99 next to the tarpit is compared with its solo p99 (target ≤ 2×). The
// noisy tenant's load runs in a worker thread (bench/noisy-load.js), as another client would:
// the quiet tenant's timings are taken on an event loop that does only the quiet tenant's work.
//
//   npm run build && node bench/noisy-tenant.js
//   BENCH_DURATION=20 BENCH_QUIET_RATE=50 node bench/noisy-tenant.js
//
// Settings (environment):
//   BENCH_DURATION     measured seconds per phase (default 8)
//   BENCH_ROUNDS       turns the solo and with-limits phases take, sharing their seconds (default 4)
//   BENCH_QUIET_RATE   the quiet tenant's calls a second (default 20); the noisy tenant sends 10×
//   BENCH_NOISY_LIMIT  the noisy tenant's limit in phase 2, calls a second (default = quiet rate)
//   BENCH_NOISY_LEAD   seconds the noisy tenant sends before each measured turn (default 1)
//   BENCH_WEBHOOK_RATE the quiet tenant's events a second in the webhook phases (default 4; 0 skips them)
//   BENCH_ONLY         "webhooks" runs the webhook phases alone
//   BENCH_PG_URL       PostgreSQL admin URL (default postgres://postgres@127.0.0.1:5432/postgres)
//   BENCH_REDIS_URL    Redis URL (default redis://127.0.0.1:6379)
//   BENCH_HUB_ENV      extra hub settings, "NAME=value NAME=value"
//
// Exit status: 0 when every phase ran (whatever the verdict); 1 when a quiet call failed solo or
// with limits, or setup failed; 2 when PostgreSQL or Redis is unreachable.

import { mkdir, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { envNumber, freshHubSettings, log, parseHubEnv, percentile, processTicks, round, rpc, runBench, startHubProcess, TICKS_PER_SECOND } from './lib.js';
import { drive, inWorker, memberToggler, openLoop } from './noisy-load.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const TARGET = 1.5;

const duration = envNumber('BENCH_DURATION', 8, 1);
const rounds = envNumber('BENCH_ROUNDS', 4, 1);
const quietRate = envNumber('BENCH_QUIET_RATE', 20, 1);
const noisyRate = quietRate * 10;
const noisyLimit = envNumber('BENCH_NOISY_LIMIT', quietRate, 1);
const noisyLead = envNumber('BENCH_NOISY_LEAD', 1, 0);
const webhookRate = envNumber('BENCH_WEBHOOK_RATE', 4, 0);
const only = process.env.BENCH_ONLY;
if (only && only !== 'webhooks') throw new Error(`BENCH_ONLY must be "webhooks" or unset, not "${only}"`);
const pgUrl = process.env.BENCH_PG_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
const redisUrl = process.env.BENCH_REDIS_URL || 'redis://127.0.0.1:6379';

/** An HTTP server on loopback; `handle(req, res)` answers (or never does). */
async function listen(handle) {
  const server = createServer(handle);
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  return { url: `http://127.0.0.1:${server.address().port}/hook`, close: () => { server.closeAllConnections(); server.close(); } };
}

function summary(results) {
  const ok = results.filter((r) => r.status === 200).map((r) => r.ms).sort((a, b) => a - b);
  return {
    calls: results.length,
    ok: ok.length,
    limited: results.filter((r) => r.status === 429).length,
    failed: results.filter((r) => r.status !== 200 && r.status !== 429).length,
    p50_ms: round(percentile(ok, 50), 2),
    p99_ms: round(percentile(ok, 99), 2),
  };
}

await runBench(async (cleanups) => {
  const settings = await freshHubSettings(cleanups, { pgUrl, redisUrl });
  // Loopback webhook receivers need the egress guard relaxed, as in tests.
  // Metrics on: each phase reports the hub's garbage collection, read from /metrics between turns.
  const hub = await startHubProcess(ROOT, { ...settings.env, HUB_ADMIN_TOKEN: settings.adminToken, HUB_EGRESS_ALLOW_PRIVATE: 'true', HUB_METRICS: 'true', ...parseHubEnv() });
  cleanups.push(() => hub.stop());
  const admin = async (method, params) => {
    const reply = await rpc(hub.url, '/admin', settings.adminToken, method, params);
    if (reply.error) throw new Error(`${method}: ${JSON.stringify(reply.error)}`);
    return reply.result;
  };
  const tenant = async (name) => {
    const { api_key: key } = await admin('agents.create', { tenant_id: name, name, create_tenant: true });
    const reply = await rpc(hub.url, '/a2a', key, 'x-hub/workspace.create', { name });
    if (reply.error) throw new Error(`workspace.create: ${JSON.stringify(reply.error)}`);
    return { key, workspaceId: reply.result.workspace.id };
  };
  const quiet = await tenant('quiet');
  const noisy = await tenant('noisy');
  const off = { per_sec: 0, burst: 1 };
  const setNoisy = (limits) => admin('tenants.set_limits', { tenant_id: 'noisy', limits });

  /** The calls phases (solo, with limits, without); true when a quiet call failed solo or with limits. */
  const callPhases = async () => {
    log(`noisy-tenant: quiet ${quietRate}/s, noisy ${noisyRate}/s, ${duration} s per phase; the noisy tenant's limit with limits: ${noisyLimit}/s, lead-in ${noisyLead} s`);
    // Warm-up: connections, caches, JIT.
    await Promise.all([openLoop(hub.url, quiet.key, quiet.workspaceId, quietRate, 2), inWorker({ kind: 'calls', url: hub.url, key: noisy.key, workspaceId: noisy.workspaceId, rate: quietRate, seconds: 2 })]);

    /** A phase's calls and CPU, added up over its turns. */
    const tally = () => ({ q: [], lead: [], n: [], hubMs: 0, benchMs: 0, seconds: 0, gc: { pauses: 0, ms: 0, over10: 0 } });
    /**
     * Runs the quiet tenant (and the noisy one with `withNoisy`) for `seconds`, adding to `calls`.
     * The noisy tenant starts `noisyLead` seconds early; the quiet tenant's calls of those seconds
     * go to `calls.lead`, the rest to `calls.q`.
     */
    const run = async (withNoisy, seconds, calls) => {
      const lead = withNoisy ? noisyLead : 0;
      const gcBefore = await gcSoFar(hub.url);
      const before = { hub: processTicks(hub.pid), bench: process.cpuUsage() };
      const measuredFrom = performance.now() + lead * 1000;
      const [q, n] = await Promise.all([
        openLoop(hub.url, quiet.key, quiet.workspaceId, quietRate, lead + seconds),
        withNoisy ? inWorker({ kind: 'calls', url: hub.url, key: noisy.key, workspaceId: noisy.workspaceId, rate: noisyRate, seconds: lead + seconds }) : Promise.resolve([]),
      ]);
      const used = process.cpuUsage(before.bench);
      for (const call of q) (call.sent < measuredFrom ? calls.lead : calls.q).push(call);
      calls.n.push(...n);
      calls.hubMs += ((processTicks(hub.pid) - before.hub) * 1000) / TICKS_PER_SECOND;
      // The bench process's CPU is the load generators' (both tenants, the worker thread included).
      calls.benchMs += (used.user + used.system) / 1000;
      calls.seconds += lead + seconds;
      const gcAfter = await gcSoFar(hub.url);
      for (const field of ['pauses', 'ms', 'over10']) calls.gc[field] += gcAfter[field] - gcBefore[field];
      return calls;
    };
    const report = (name, calls) => {
      const share = (ms) => round((ms / (calls.seconds * 1000)) * 100, 0);
      const gc = { pauses: calls.gc.pauses, ms: round(calls.gc.ms, 1), over_10ms: calls.gc.over10 };
      const result = { phase: name, quiet: summary(calls.q), quiet_lead_in: calls.lead.length ? summary(calls.lead) : undefined, noisy: calls.n.length ? summary(calls.n) : undefined, cpu_percent: { hub: share(calls.hubMs), load: share(calls.benchMs) }, hub_gc: gc };
      log(`  ${name.padEnd(15)} quiet p50 ${result.quiet.p50_ms} ms, p99 ${result.quiet.p99_ms} ms (${result.quiet.ok}/${result.quiet.calls} ok)` +
        (result.noisy ? `; noisy ${result.noisy.ok} ok, ${result.noisy.limited} limited, ${result.noisy.failed} failed` : '') +
        `; CPU: hub ${result.cpu_percent.hub}%, load generators ${result.cpu_percent.load}% of a core` +
        `; hub GC: ${gc.pauses} pauses, ${gc.ms} ms, ${gc.over_10ms} over 10 ms`);
      const leadIn = result.quiet_lead_in;
      if (leadIn) log(`  ${''.padEnd(15)} not counted above, the noisy tenant's first ${noisyLead} s of each turn: quiet p50 ${leadIn.p50_ms} ms, p99 ${leadIn.p99_ms} ms (${leadIn.ok}/${leadIn.calls} ok)`);
      return result;
    };

    // The gateway reads a tenant's overrides at most 5 s old: each change is followed by a pause.
    const settle = () => new Promise((ok) => setTimeout(ok, 5_500));
    await setNoisy({ key: { per_sec: noisyLimit, burst: noisyLimit }, tenant: { per_sec: noisyLimit, burst: noisyLimit } });
    await settle();
    // Solo and with limits take turns, so that whatever drifts during the run (a vacuum, the
    // machine's other load, the JIT) falls on both alike.
    const alone = tally();
    const beside = tally();
    for (let round = 0; round < rounds; round++) {
      await run(false, duration / rounds, alone);
      await run(true, duration / rounds, beside);
    }
    const solo = report('solo', alone);
    const limited = report('with limits', beside);
    // Last: the backlog an unlimited noisy tenant leaves behind must not weigh on another phase.
    await setNoisy({ key: off, tenant: off });
    await settle();
    const unlimited = report('without limits', await run(true, duration, tally()));

    const ratio = (r) => round(r.quiet.p99_ms / solo.quiet.p99_ms, 2);
    const verdict = ratio(limited) <= TARGET ? 'PASS' : 'BELOW TARGET';
    log(`  quiet p99 / solo p99: without limits ${ratio(unlimited)}×, with limits ${ratio(limited)}× (target ≤ ${TARGET}×): ${verdict}`);
    await mkdir(join(ROOT, 'bench', 'results'), { recursive: true });
    await writeFile(
      join(ROOT, 'bench', 'results', 'noisy-tenant.json'),
      `${JSON.stringify({ quietRate, noisyRate, noisyLimit, noisyLead, duration, phases: [solo, limited, unlimited], ratios: { without: ratio(unlimited), with: ratio(limited) }, verdict }, null, 2)}\n`,
    );
    // Without limits the quiet tenant may fail (that is the point); solo and with limits it must not.
    if (unlimited.quiet.failed) log(`  without limits ${unlimited.quiet.failed} of the quiet tenant's calls failed`);
    const quietFailed = [solo.quiet, limited.quiet, limited.quiet_lead_in].some((q) => q && (q.failed > 0 || q.limited > 0));
    if (quietFailed) log('  the quiet tenant had failed or limited calls solo or with limits: no figures are claimed from this run');
    return quietFailed;
  };
  const quietFailed = only === 'webhooks' ? false : await callPhases();
  const webhooks = webhookRate > 0 ? await webhookPhases(hub, admin, quiet, noisy, setNoisy) : undefined;
  if (webhooks) {
    await writeFile(join(ROOT, 'bench', 'results', 'noisy-tenant-webhooks.json'), `${JSON.stringify(webhooks, null, 2)}\n`);
  }
  return quietFailed ? 1 : 0;
});

/**
 * The hub's garbage collection so far, from its /metrics (both processes under HUB_PROCESSES=2):
 * pauses, their total, and the pauses over 10 ms (prom-client's GC buckets end at 1, 10, 100 ms…).
 */
async function gcSoFar(url) {
  const text = await (await fetch(`${url}/metrics`)).text();
  let pauses = 0;
  let seconds = 0;
  let upTo10 = 0;
  for (const line of text.split('\n')) {
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (line.startsWith('nodejs_gc_duration_seconds_count{')) pauses += value;
    else if (line.startsWith('nodejs_gc_duration_seconds_sum{')) seconds += value;
    else if (line.startsWith('nodejs_gc_duration_seconds_bucket{le="0.01",')) upTo10 += value;
  }
  return { pauses, ms: seconds * 1000, over10: pauses - upTo10 };
}

/**
 * The quiet tenant's webhook latency (event caused → delivery received), alone and next to the
 * noisy tenant's tarpit webhooks.
 */
async function webhookPhases(hub, admin, quiet, noisy, setNoisy) {
  const url = hub.url;
  const call = async (key, method, params) => {
    const reply = await rpc(url, '/a2a', key, method, params);
    if (reply.error) throw new Error(`${method}: ${JSON.stringify(reply.error)}`);
    return reply.result;
  };
  const arrivals = [];
  const prompt = await listen((req, res) => {
    req.resume();
    req.on('end', () => {
      arrivals.push(performance.now());
      res.writeHead(204).end();
    });
  });
  const held = [];
  const tarpit = await listen((req, res) => {
    req.resume();
    held.push(res);
  });
  try {
    await setNoisy({ key: { per_sec: 0, burst: 1 }, tenant: { per_sec: 0, burst: 1 } });
    const peer = async (tenant) => (await admin('agents.create', { tenant_id: tenant, name: `${tenant}-peer`, create_tenant: true })).agent.id;
    const quietPeer = await peer('quiet');
    const noisyPeer = await peer('noisy');
    await call(quiet.key, 'x-hub/webhooks.create', { workspace_id: quiet.workspaceId, url: prompt.url, events: ['workspace.member.added', 'workspace.member.removed'] });
    const noisyWorkspaces = [];
    for (let w = 0; w < 3; w++) {
      const id = (await call(noisy.key, 'x-hub/workspace.create', { name: `tarpit ${w}` })).workspace.id;
      for (let h = 0; h < 20; h++) await call(noisy.key, 'x-hub/webhooks.create', { workspace_id: id, url: tarpit.url, events: ['workspace.member.added', 'workspace.member.removed'] });
      noisyWorkspaces.push(id);
    }
    const quietEvent = memberToggler(url, quiet.key, quietPeer);
    const measure = async (name, withNoisy) => {
      arrivals.length = 0;
      const ticks = processTicks(hub.pid);
      const [sent] = await Promise.all([
        drive(webhookRate, duration, () => quietEvent(quiet.workspaceId)),
        withNoisy ? inWorker({ kind: 'events', url, key: noisy.key, peerId: noisyPeer, workspaceIds: noisyWorkspaces, rate: webhookRate * 10, seconds: duration }) : Promise.resolve(0),
      ]);
      // The hub's CPU while the events were caused, both tenants' (and the tarpit's cost) included.
      const hubCpu = round((((processTicks(hub.pid) - ticks) / TICKS_PER_SECOND) / duration) * 100, 0);
      const deadline = performance.now() + 30_000;
      while (arrivals.length < sent.length && performance.now() < deadline) await new Promise((ok) => setTimeout(ok, 50));
      // One webhook delivers in order: the i-th arrival is the i-th event's.
      const ms = sent.slice(0, arrivals.length).map((at, i) => arrivals[i] - at).sort((a, b) => a - b);
      const result = { phase: name, events: sent.length, delivered: arrivals.length, p50_ms: round(percentile(ms, 50), 1), p99_ms: round(percentile(ms, 99), 1), tarpit_held: held.length, hub_cpu_percent: hubCpu };
      log(`  webhooks ${name.padEnd(12)} quiet p50 ${result.p50_ms} ms, p99 ${result.p99_ms} ms (${result.delivered}/${result.events} delivered); tarpit requests held so far: ${held.length}; hub CPU ${hubCpu}% of a core`);
      return result;
    };
    const solo = await measure('solo', false);
    const tarpitted = await measure('next to tarpit', true);
    const ratio = round(tarpitted.p99_ms / solo.p99_ms, 2);
    const verdict = tarpitted.delivered === tarpitted.events && ratio <= 2 ? 'PASS' : 'BELOW TARGET';
    log(`  webhooks: quiet p99 next to the tarpit / solo p99: ${ratio}× (target ≤ 2×): ${verdict}`);
    return { webhookRate, phases: [solo, tarpitted], ratio, verdict };
  } finally {
    for (const res of held) res.destroy();
    prompt.close();
    tarpit.close();
  }
}
