#!/usr/bin/env node
// Benchmark: a quiet tenant's latency while a noisy tenant sends at 10× its rate, with and without
// rate limits. One hub (`serve all` on PostgreSQL and Redis, as a child process); both tenants
// call `x-hub/workspace.get` on a workspace of their own, open-loop at fixed rates:
//   1. solo:            the quiet tenant alone;
//   2. without limits:  quiet + noisy, the noisy tenant's limits turned off (override, rate 0);
//   3. with limits:     quiet + noisy, the noisy tenant held to BENCH_NOISY_LIMIT calls a second
//                       (`tenants.set_limits`); its excess is refused with 429 before any lookup.
// Prints the quiet tenant's p50/p99 per phase and the ratios to its solo p99; the target is
// p99 (with limits) ≤ 1.5 × p99 (solo).
//
//   npm run build && node bench/noisy-tenant.js
//   BENCH_DURATION=20 BENCH_QUIET_RATE=50 node bench/noisy-tenant.js
//
// Settings (environment):
//   BENCH_DURATION     measured seconds per phase (default 8)
//   BENCH_QUIET_RATE   the quiet tenant's calls a second (default 40); the noisy tenant sends 10×
//   BENCH_NOISY_LIMIT  the noisy tenant's limit in phase 3, calls a second (default = quiet rate)
//   BENCH_PG_URL       PostgreSQL admin URL (default postgres://postgres@127.0.0.1:5432/postgres)
//   BENCH_REDIS_URL    Redis URL (default redis://127.0.0.1:6379)
//   BENCH_HUB_ENV      extra hub settings, "NAME=value NAME=value"
//
// Exit status: 0 when every phase ran (whatever the verdict); 1 when a quiet call failed solo or
// with limits, or setup failed; 2 when PostgreSQL or Redis is unreachable.

import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { envNumber, freshHubSettings, log, parseHubEnv, percentile, round, rpc, runBench, startHubProcess } from './lib.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const TARGET = 1.5;

const duration = envNumber('BENCH_DURATION', 8, 1);
const quietRate = envNumber('BENCH_QUIET_RATE', 40, 1);
const noisyRate = quietRate * 10;
const noisyLimit = envNumber('BENCH_NOISY_LIMIT', quietRate, 1);
const pgUrl = process.env.BENCH_PG_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
const redisUrl = process.env.BENCH_REDIS_URL || 'redis://127.0.0.1:6379';

/**
 * Sends one `x-hub/workspace.get` every 1/rate seconds for `seconds`, not waiting for answers
 * (open loop: a slow hub does not slow the sender down). Returns each call's latency and status.
 */
async function openLoop(url, key, workspaceId, rate, seconds) {
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'x-hub/workspace.get', params: { workspace_id: workspaceId } });
  const results = [];
  const pending = [];
  const start = performance.now();
  const total = Math.round(rate * seconds);
  for (let i = 0; i < total; i++) {
    const due = start + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((ok) => setTimeout(ok, wait));
    const sent = performance.now();
    pending.push(
      fetch(`${url}/a2a`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` }, body })
        .then(async (response) => {
          await response.arrayBuffer();
          results.push({ ms: performance.now() - sent, status: response.status });
        })
        .catch(() => results.push({ ms: performance.now() - sent, status: 0 })),
    );
  }
  await Promise.all(pending);
  return results;
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
  const hub = await startHubProcess(ROOT, { ...settings.env, HUB_ADMIN_TOKEN: settings.adminToken, ...parseHubEnv() });
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

  log(`noisy-tenant: quiet ${quietRate}/s, noisy ${noisyRate}/s, ${duration} s per phase; limit in phase 3: ${noisyLimit}/s`);
  // Warm-up: connections, caches, JIT.
  await Promise.all([openLoop(hub.url, quiet.key, quiet.workspaceId, quietRate, 2), openLoop(hub.url, noisy.key, noisy.workspaceId, quietRate, 2)]);

  const phase = async (name, withNoisy) => {
    const [q, n] = await Promise.all([
      openLoop(hub.url, quiet.key, quiet.workspaceId, quietRate, duration),
      withNoisy ? openLoop(hub.url, noisy.key, noisy.workspaceId, noisyRate, duration) : Promise.resolve([]),
    ]);
    const result = { phase: name, quiet: summary(q), noisy: withNoisy ? summary(n) : undefined };
    log(`  ${name.padEnd(15)} quiet p50 ${result.quiet.p50_ms} ms, p99 ${result.quiet.p99_ms} ms (${result.quiet.ok}/${result.quiet.calls} ok)` +
      (result.noisy ? `; noisy ${result.noisy.ok} ok, ${result.noisy.limited} limited, ${result.noisy.failed} failed` : ''));
    return result;
  };

  await setNoisy({ key: off, tenant: off });
  const solo = await phase('solo', false);
  const unlimited = await phase('without limits', true);
  await setNoisy({ key: { per_sec: noisyLimit, burst: noisyLimit }, tenant: { per_sec: noisyLimit, burst: noisyLimit } });
  // The gateway reads a tenant's overrides at most 5 s old.
  await new Promise((ok) => setTimeout(ok, 5_500));
  const limited = await phase('with limits', true);

  const ratio = (r) => round(r.quiet.p99_ms / solo.quiet.p99_ms, 2);
  const verdict = ratio(limited) <= TARGET ? 'PASS' : 'BELOW TARGET';
  log(`  quiet p99 / solo p99: without limits ${ratio(unlimited)}×, with limits ${ratio(limited)}× (target ≤ ${TARGET}×): ${verdict}`);
  await mkdir(join(ROOT, 'bench', 'results'), { recursive: true });
  await writeFile(
    join(ROOT, 'bench', 'results', 'noisy-tenant.json'),
    `${JSON.stringify({ quietRate, noisyRate, noisyLimit, duration, phases: [solo, unlimited, limited], ratios: { without: ratio(unlimited), with: ratio(limited) }, verdict }, null, 2)}\n`,
  );
  // Without limits the quiet tenant may fail (that is the point); solo and with limits it must not.
  if (unlimited.quiet.failed) log(`  without limits ${unlimited.quiet.failed} of the quiet tenant's calls failed`);
  const quietFailed = [solo, limited].some((p) => p.quiet.failed > 0 || p.quiet.limited > 0);
  if (quietFailed) log('  the quiet tenant had failed or limited calls solo or with limits: no figures are claimed from this run');
  return quietFailed ? 1 : 0;
});
