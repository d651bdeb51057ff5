#!/usr/bin/env node
// Soak: sustained non-blocking SendMessage load, first on the hub (`serve all`, real PostgreSQL
// and Redis), then on an `@a2a-js/sdk` server with its in-memory task store (bench/a2a.js
// direct-server), each for the same time under the same autocannon load; samples each server's
// resident memory (RSS, from /proc) over time and reports whether it stayed flat: the last
// sample within 10% of the first one taken after the warm-up.
//
//   npm run build && node bench/soak.js                  (5 minutes per server, the issue's soak)
//   BENCH_SOAK_SECONDS=30 node bench/soak.js             (a short run)
//
// Settings (environment):
//   BENCH_SOAK_SECONDS   measured seconds of load per server (default 300)
//   BENCH_SOAK_SAMPLE    seconds between RSS samples (default 10)
//   BENCH_WARMUP         warm-up seconds before the first sample (default 30: at 1,400 sends/s the
//                        hub still grows to its working size for about that long)
//   BENCH_CONNECTIONS    autocannon connections (default 32)
//   BENCH_ONLY           hub | sdk: soak one of them only
//   BENCH_PG_URL / BENCH_REDIS_URL / BENCH_HUB_ENV / BENCH_HUB_NODE_ARGS   as in the other benchmarks
// Results go to bench/results/soak.json. Exit 0 when both runs measured without failures (FLAT
// or GREW is printed), 1 on failures, 2 when PostgreSQL or Redis is unreachable.

import { mkdir, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { cpus } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { envNumber, fmt, freshHubSettings, log, parseHubEnv, processRssMiB, round, rpc, runBench, startHubProcess, startNodeProcess } from './lib.js';

const require = createRequire(import.meta.url);
const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '..');
/** RSS may end this much above its first post-warm-up sample and still count as flat. */
const FLAT_TOLERANCE = 0.1;

function settings() {
  return {
    seconds: envNumber('BENCH_SOAK_SECONDS', 300, 5),
    sample: envNumber('BENCH_SOAK_SAMPLE', 10, 1),
    warmup: envNumber('BENCH_WARMUP', 30, 0),
    connections: Math.round(envNumber('BENCH_CONNECTIONS', 32, 1)),
    only: process.env.BENCH_ONLY || '',
    hubEnv: parseHubEnv(),
    pgUrl: process.env.BENCH_PG_URL || 'postgres://postgres@127.0.0.1:5432/postgres',
    redisUrl: process.env.BENCH_REDIS_URL || 'redis://127.0.0.1:6379',
  };
}

/** Load on `url` for warm-up + `seconds`, sampling `pid`'s RSS every `sample` s after the warm-up. */
async function soak(label, pid, url, headers, body, opts) {
  const autocannon = require('autocannon');
  log(`[${label}] ${opts.warmup} s warm-up, then ${opts.seconds} s with an RSS sample every ${opts.sample} s…`);
  const samples = [];
  const started = Date.now();
  let sampler;
  const startSampling = () => {
    const take = () => {
      const rss = processRssMiB(pid);
      samples.push({ s: round((Date.now() - started) / 1000 - opts.warmup, 1), rssMiB: rss });
      log(`[${label}]   t=${samples.at(-1).s} s  RSS ${rss} MiB`);
    };
    take();
    sampler = setInterval(take, opts.sample * 1000);
  };
  const warmTimer = setTimeout(startSampling, opts.warmup * 1000);
  const result = await new Promise((ok, fail) => {
    autocannon(
      {
        url,
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body,
        connections: opts.connections,
        duration: opts.warmup + opts.seconds,
        timeout: 10,
        verifyBody: (text) => text.startsWith('{"jsonrpc":"2.0","id":1,"result":'),
      },
      (err, r) => (err ? fail(err) : ok(r)),
    );
  });
  clearTimeout(warmTimer);
  clearInterval(sampler);
  samples.push({ s: round((Date.now() - started) / 1000 - opts.warmup, 1), rssMiB: processRssMiB(pid) });
  const failed = result.errors + result.timeouts + result.non2xx + result.mismatches;
  const first = samples[0]?.rssMiB;
  const last = samples.at(-1)?.rssMiB;
  const growth = first && last ? (last - first) / first : null;
  const summary = {
    valid: failed === 0,
    failed,
    sends: result['2xx'] - result.mismatches,
    perSec: round((result['2xx'] - result.mismatches) / result.duration, 0),
    rss: { firstMiB: first, lastMiB: last, maxMiB: Math.max(...samples.map((x) => x.rssMiB ?? 0)), growth: round(growth, 3) },
    flat: growth !== null && growth <= FLAT_TOLERANCE,
    samples,
  };
  log(`[${label}] ${fmt(summary.sends)} sends (${fmt(summary.perSec)}/s, ${failed} failed); RSS ${first} → ${last} MiB (max ${summary.rss.maxMiB}), ${growth === null ? '?' : `${(growth * 100).toFixed(1)}%`}: ${summary.flat ? 'FLAT' : 'GREW'}`);
  return summary;
}

async function run(cleanups) {
  const opts = settings();
  log(`Soak: non-blocking SendMessage for ${opts.seconds} s on the hub, then on an @a2a-js/sdk server; RSS over time`);
  log(`  ${opts.connections} connections; node ${process.version}, ${cpus().length} CPUs`);
  const { id, adminToken, env } = await freshHubSettings(cleanups, opts);
  const hub = await startHubProcess(ROOT, { ...env, HUB_ADMIN_TOKEN: adminToken, ...opts.hubEnv });
  cleanups.push(() => hub.stop());
  const agent = async (name) => {
    const created = await rpc(hub.url, '/admin', adminToken, 'agents.create', { tenant_id: `bench-${id}`, name, create_tenant: true });
    if (created.error) throw new Error(`agents.create failed: ${JSON.stringify(created.error)}`);
    return { agentId: created.result.agent.id, apiKey: created.result.api_key };
  };
  const sender = await agent('sender');
  const queue = await agent('offline recipient');
  const hubBody = JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'SendMessage',
    params: { message: { role: 'user', parts: [{ kind: 'text', text: 'soak message' }] }, configuration: { agentId: queue.agentId } },
  });
  const hubRun = opts.only === 'sdk' ? undefined : await soak('hub', hub.pid, `${hub.url}/a2a`, { authorization: `Bearer ${sender.apiKey}` }, hubBody, opts);
  await hub.stop();

  let sdkRun;
  if (opts.only !== 'hub') {
    const sdkProcess = await startNodeProcess(cleanups, ROOT, [join(HERE, 'a2a.js'), 'direct-server'], {}, /listening on (\S+)/);
    const sdkBody = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: 'soak', role: 'ROLE_USER', parts: [{ text: 'soak message' }] } } });
    sdkRun = await soak('@a2a-js/sdk server', sdkProcess.pid, `${sdkProcess.match[1]}/a2a`, { 'a2a-version': '1.0' }, sdkBody, opts);
  }

  log('');
  if (hubRun) log(`hub                 RSS ${hubRun.rss.firstMiB} → ${hubRun.rss.lastMiB} MiB over ${opts.seconds} s at ${fmt(hubRun.perSec)} sends/s   target within ${FLAT_TOLERANCE * 100}%   ${hubRun.flat ? 'FLAT' : 'GREW'}`);
  if (sdkRun) log(`@a2a-js/sdk server  RSS ${sdkRun.rss.firstMiB} → ${sdkRun.rss.lastMiB} MiB over ${opts.seconds} s at ${fmt(sdkRun.perSec)} sends/s   ${sdkRun.flat ? 'FLAT' : 'GREW'}`);
  const report = { benchmark: 'soak', date: new Date().toISOString(), node: process.version, cpus: cpus().length, settings: { ...opts, pgUrl: undefined, redisUrl: undefined }, hub: hubRun ?? null, sdk: sdkRun ?? null };
  await mkdir(join(HERE, 'results'), { recursive: true });
  await writeFile(join(HERE, 'results', 'soak.json'), `${JSON.stringify(report, null, 2)}\n`);
  log(`Results written to ${join('bench', 'results', 'soak.json')}`);
  return (hubRun?.valid ?? true) && (sdkRun?.valid ?? true) ? 0 : 1;
}

await runBench(run);
