#!/usr/bin/env node
// Faults on a three-node Kafka cluster (issue 20, item 4), through the real hub: calls →
// workspace/secrets transaction with its outbox row → relay → Kafka (idempotent producer, acks
// all; topic replication factor 3, min.insync.replicas 2) → events service → signed webhook to a
// receiver in this process, on real PostgreSQL and Redis.
//
//   1. Leader killed: a burst of BENCH_EVENTS workspace events (x-hub/workspace.secrets.set; one
//      sequential caller per workspace, so each workspace's events have one order) and, halfway,
//      SIGKILL of the broker leading the events topic's partition of the first workspace. Every
//      accepted event must arrive, each workspace's in the order of its calls.
//   2. Events replica killed: a second hub process (`serve all`; its events service joins the
//      same consumer group, agenthub-events, and takes about half of the partitions), SIGKILLed
//      halfway through another burst; the first hub's events service must take its partitions over
//      (after the group's session timeout) and deliver everything, duplicates counted.
// Figures: events sent (calls), accepted, delivered (distinct webhook-ids), lost, duplicate
// requests, order violations, time to recover (SIGKILL → first webhook of an event whose call
// started after it, on the partitions the dead node held) and the longest call.
//
//   npm run test:kafka-cluster   (builds, starts the cluster in .ci/kafka/target-cluster, runs this, stops it)
//   node bench/kafka-cluster.js  (on a cluster already started: KAFKA_NODES=3 bash .ci/kafka.sh start)
//
// Settings (environment):
//   KAFKA_TARGET        the cluster's directory (.ci/kafka.sh; default .ci/kafka/target-cluster)
//   BENCH_EVENTS        events per burst (default 2000)
//   BENCH_WORKSPACES    workspaces, one webhook and one caller each (default 8)
//   BENCH_DRAIN_S       longest wait for the last webhooks after a burst (default 180)
//   BENCH_PG_URL, BENCH_REDIS_URL as the other benchmarks
// Exit status: 0 when nothing was lost and every order was kept, 1 otherwise or on a failure,
// 2 when PostgreSQL or Redis is unreachable. Results go to bench/results/kafka-cluster.json.

import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import kafkajs from 'kafkajs';
import { createAgentKey, fmt, freshHubSettings, log, okRpc, round, rpc, runBench, startHubProcess, startReceiver, UsageError } from './lib.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '..');
const RESULTS_DIR = join(HERE, 'results');
const TOPIC = 'agenthub.workspace.events';
const GROUP = 'agenthub-events';
const { Kafka, logLevel, Partitioners, AssignerProtocol } = kafkajs;

function settings() {
  const number = (name, fallback, min) => {
    const raw = process.env[name];
    if (raw === undefined || raw === '') return fallback;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < min) throw new UsageError(`${name} must be an integer ≥ ${min} (got "${raw}")`);
    return value;
  };
  return {
    target: process.env.KAFKA_TARGET || join(ROOT, '.ci', 'kafka', 'target-cluster'),
    events: number('BENCH_EVENTS', 2000, 10),
    workspaces: number('BENCH_WORKSPACES', 8, 1),
    drainSeconds: number('BENCH_DRAIN_S', 180, 1),
    pgUrl: process.env.BENCH_PG_URL || 'postgres://postgres@127.0.0.1:5432/postgres',
    redisUrl: process.env.BENCH_REDIS_URL || 'redis://127.0.0.1:6379',
  };
}

const kafkaSh = (target, ...args) =>
  execFileSync('bash', [join(ROOT, '.ci', 'kafka.sh'), ...args], { env: { ...process.env, KAFKA_TARGET: target }, encoding: 'utf8' }).trim();

async function run(cleanups) {
  const opts = settings();
  const brokers = (await readFile(join(opts.target, 'brokers'), 'utf8').catch(() => '')).trim().split(',').filter(Boolean);
  if (brokers.length !== 3) throw new UsageError(`no three-node cluster in ${opts.target}: start one with KAFKA_NODES=3 KAFKA_TARGET=${opts.target} bash .ci/kafka.sh start`);
  log('AgentHub fault tests on a three-node Kafka cluster (RF 3, min.insync.replicas 2, idempotent producer, acks all)');
  log(`  brokers ${brokers.join(',')}; ${fmt(opts.events)} events per burst over ${opts.workspaces} workspaces`);

  const admin = new Kafka({ clientId: 'agenthub-faults', brokers, logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  cleanups.push(() => admin.disconnect());

  // The topics made up front, as docs/operations.md advises for production (partitions chosen,
  // replication factor from the brokers: 3), and known to every broker before the hub starts.
  const topicsWanted = [TOPIC, 'agenthub.messaging.events'];
  const existing = new Set(await admin.listTopics());
  const missing = topicsWanted.filter((t) => !existing.has(t));
  if (missing.length) await admin.createTopics({ topics: missing.map((topic) => ({ topic, numPartitions: 6 })), waitForLeaders: false });
  for (const broker of brokers) {
    const one = new Kafka({ clientId: 'agenthub-faults', brokers: [broker], logLevel: logLevel.NOTHING }).admin();
    await one.connect();
    try {
      for (let tries = 0; ; tries += 1) {
        try {
          const { topics } = await one.fetchTopicMetadata({ topics: topicsWanted });
          if (topics.every((t) => t.partitions.length === 6 && t.partitions.every((p) => p.leader >= 0))) break;
        } catch (err) {
          if (tries > 300) throw err;
        }
        await sleep(100);
      }
    } finally {
      await one.disconnect();
    }
  }

  const { id, adminToken, env } = await freshHubSettings(cleanups, opts);
  const receiver = await startReceiver();
  cleanups.push(() => receiver.close());
  const hubEnv = {
    ...env,
    HUB_ADMIN_TOKEN: adminToken,
    HUB_EGRESS_ALLOW_PRIVATE: 'true',
    KAFKA_BROKERS: brokers.join(','),
    EMBEDDINGS_THREADS: '1',
  };
  const hub = await startHubProcess(ROOT, hubEnv);
  cleanups.push(() => hub.stop());
  log(`  hub A up at ${hub.url} (pid ${hub.pid})`);

  const call = (key, method, params) => okRpc(hub.url, key, method, params);
  const apiKey = await createAgentKey(hub.url, adminToken, `faults-${id}`, 'fault agent');
  const workspaces = [];
  for (let w = 0; w < opts.workspaces; w += 1) {
    const workspaceId = (await call(apiKey, 'x-hub/workspace.create', { name: `faults ${w}` })).workspace.id;
    const path = `/ws/${w}`;
    const { webhook } = await call(apiKey, 'x-hub/webhooks.create', { workspace_id: workspaceId, url: receiver.url(path), events: ['workspace.secret.set'] });
    receiver.secrets.set(path, webhook.secret);
    workspaces.push({ id: workspaceId, path });
  }

  /** The events topic's partitions (leader, replicas, in-sync replicas) and each workspace's partition. */
  const topology = async () => {
    const { topics } = await admin.fetchTopicMetadata({ topics: [TOPIC] });
    const partitions = topics[0].partitions;
    const partitioner = Partitioners.DefaultPartitioner();
    const partitionOf = (key) => partitioner({ topic: TOPIC, partitionMetadata: partitions, message: { key } });
    return { partitions, partitionOf };
  };

  /**
   * One burst: a sequential caller per workspace, `opts.events` calls in all; `atHalf` runs once
   * half of them returned. Keys carry the per-workspace sequence number.
   */
  const burst = async (part, atHalf) => {
    const perWorkspace = Math.ceil(opts.events / opts.workspaces);
    const calls = new Map(); // `${w}:${seq}` → { started, ms, ok }
    let done = 0;
    let half;
    const start = performance.now();
    await Promise.all(
      workspaces.map(async (ws, w) => {
        for (let seq = 0; seq < perWorkspace && w + seq * opts.workspaces < opts.events; seq += 1) {
          const started = performance.now();
          const reply = await rpc(hub.url, '/a2a', apiKey, 'x-hub/workspace.secrets.set', { workspace_id: ws.id, key: `R${part}_${String(seq).padStart(5, '0')}`, value: 'v' });
          calls.set(`${w}:${seq}`, { started, ms: performance.now() - started, ok: Boolean(reply.result && !reply.error), error: reply.error });
          done += 1;
          if (done === Math.floor(opts.events / 2)) half = atHalf();
        }
      }),
    );
    const callsDone = performance.now();
    const killedAt = await half;
    return { calls, start, callsDone, killedAt };
  };

  const totalRequests = () => workspaces.reduce((sum, ws) => sum + receiver.count(ws.path), 0);

  /**
   * Waits for every accepted call's webhook, then counts per workspace, by event (the key's
   * sequence number): delivered once or more, the order of first arrivals, and every request
   * beyond the first per event as a duplicate (the same webhook-id again, or the event handled
   * twice by the events service).
   */
  const settle = async (part, { calls, start, callsDone, killedAt }, affected, requestsBefore) => {
    const firstSeen = (w) => {
      const seen = new Map(); // seq → first arrival
      for (const { at, body } of receiver.arrivals(workspaces[w].path)) {
        const key = body?.data?.key;
        if (!key?.startsWith(`R${part}_`)) continue;
        const seq = Number(key.split('_')[1]);
        if (!seen.has(seq)) seen.set(seq, at);
      }
      return seen;
    };
    const accepted = [...calls.entries()].filter(([, c]) => c.ok).map(([k]) => k.split(':').map(Number));
    const missing = () => {
      const seen = workspaces.map((_, w) => firstSeen(w));
      return accepted.filter(([w, seq]) => !seen[w].has(seq));
    };
    const deadline = performance.now() + opts.drainSeconds * 1000;
    while (missing().length > 0 && performance.now() < deadline) await sleep(200);
    // Late duplicates (a replica's redelivery) get a moment to show up.
    await sleep(2_000);
    let delivered = 0;
    let orderViolations = 0;
    let recoveredAt = Infinity;
    for (let w = 0; w < workspaces.length; w += 1) {
      const seen = firstSeen(w);
      delivered += seen.size;
      const seqs = [...seen.keys()]; // in order of first arrival
      for (let i = 1; i < seqs.length; i += 1) if (seqs[i] < seqs[i - 1]) orderViolations += 1;
      if (affected.has(w)) {
        for (const [seq, at] of seen) {
          if (calls.get(`${w}:${seq}`)?.started > killedAt) {
            recoveredAt = Math.min(recoveredAt, at);
            break;
          }
        }
      }
    }
    const failures = [...calls.values()].filter((c) => !c.ok);
    return {
      sent: calls.size,
      accepted: accepted.length,
      failedCalls: failures.length,
      failedCallErrors: [...new Set(failures.map((c) => JSON.stringify(c.error)))].slice(0, 3),
      delivered,
      lost: missing().length,
      duplicates: totalRequests() - requestsBefore - delivered,
      orderViolations,
      recoverMs: Number.isFinite(recoveredAt) ? round(recoveredAt - killedAt, 0) : null,
      longestCallMs: round(Math.max(...[...calls.values()].map((c) => c.ms)), 0),
      burstMs: round(callsDone - start, 0),
    };
  };

  // ---- 1. the partition leader SIGKILLed mid-burst -------------------------------------------
  const before = await topology();
  // The harder case when it can be had: the leader that is also the events group's coordinator
  // (the leader of the __consumer_offsets partition the group id hashes to, as Java's
  // String.hashCode), so the consumer loses its coordinator too; else the first workspace's leader.
  const javaHash = [...GROUP].reduce((h, c) => (Math.imul(31, h) + c.charCodeAt(0)) | 0, 0);
  const offsetsMeta = (await admin.fetchTopicMetadata({ topics: ['__consumer_offsets'] })).topics[0].partitions;
  const coordinator = offsetsMeta.find((p) => p.partitionId === Math.abs(javaHash) % offsetsMeta.length)?.leader;
  const ledByCoordinator = workspaces.find((ws) => before.partitions.find((p) => p.partitionId === before.partitionOf(ws.id)).leader === coordinator);
  const victimPartition = before.partitionOf((ledByCoordinator ?? workspaces[0]).id);
  const victim = before.partitions.find((p) => p.partitionId === victimPartition).leader;
  log(`[leader] group ${GROUP}'s coordinator is node ${coordinator}${victim === coordinator ? ': it is the victim' : ''}`);
  const victimPartitions = new Set(before.partitions.filter((p) => p.leader === victim).map((p) => p.partitionId));
  const affected1 = new Set(workspaces.map((ws, w) => [w, before.partitionOf(ws.id)]).filter(([, p]) => victimPartitions.has(p)).map(([w]) => w));
  log(`\n[leader] topic ${TOPIC}: ${before.partitions.length} partitions, replicas ${before.partitions.map((p) => `${p.partitionId}:[${p.replicas}] leader ${p.leader}`).join(', ')}`);
  log(`[leader] node ${victim} leads partitions ${[...victimPartitions].join(',')} (workspaces ${[...affected1].join(',')}); SIGKILL it halfway through ${fmt(opts.events)} events…`);
  const requestsBefore1 = totalRequests();
  const run1 = await burst(1, async () => {
    const at = performance.now();
    log(`[leader] ${kafkaSh(opts.target, 'kill', String(victim))}`);
    return at;
  });
  const leader = await settle(1, run1, affected1, requestsBefore1);
  const after = await topology();
  leader.victimWasCoordinator = victim === coordinator;
  leader.newLeaders = after.partitions.filter((p) => victimPartitions.has(p.partitionId)).map((p) => `${p.partitionId}→${p.leader}`);
  report('leader', leader);
  log(`[leader] restarting node ${victim}: ${kafkaSh(opts.target, 'restart', String(victim))}`);

  // ---- 2. an events replica SIGKILLed mid-burst --------------------------------------------
  const assignment = async () => {
    const [group] = (await admin.describeGroups([GROUP])).groups;
    return group.members.map((m) => ({
      memberId: m.memberId,
      partitions: AssignerProtocol.MemberAssignment.decode(m.memberAssignment)?.assignment[TOPIC] ?? [],
    }));
  };
  const membersOfA = new Set((await assignment()).map((m) => m.memberId));
  const dataDir = await mkdtemp(join(tmpdir(), 'agenthub-faults-b-'));
  cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
  const hubB = await startHubProcess(ROOT, { ...hubEnv, HUB_DATA_DIR: dataDir });
  cleanups.push(() => hubB.stop());
  const twoMembers = performance.now() + 120_000;
  let members = await assignment();
  while ((members.length < 2 || members.some((m) => m.partitions.length === 0)) && performance.now() < twoMembers) {
    await sleep(500);
    members = await assignment();
  }
  if (members.length < 2) throw new Error(`hub B's events service did not join ${GROUP}: ${JSON.stringify(members)}`);
  // Hub B's member is the one hub A's was not (a member keeps its id across rebalances).
  const memberOfB = members.find((m) => !membersOfA.has(m.memberId));
  const heldByB = new Set(memberOfB?.partitions ?? []);
  log(`\n[replica] hub B up (pid ${hubB.pid}); group ${GROUP}: hub B holds partitions [${[...heldByB]}], hub A [${members.filter((m) => m !== memberOfB).flatMap((m) => m.partitions)}]`);
  const { partitionOf } = await topology();
  const affected2 = new Set(workspaces.map((ws, w) => [w, partitionOf(ws.id)]).filter(([, p]) => heldByB.has(p)).map(([w]) => w));
  const requestsBefore2 = totalRequests();
  const run2 = await burst(2, async () => {
    const at = performance.now();
    process.kill(hubB.pid, 'SIGKILL');
    log('[replica] hub B SIGKILLed');
    return at;
  });
  const replica = await settle(2, run2, affected2, requestsBefore2);
  replica.heldByKilled = [...heldByB];
  replica.affectedWorkspaces = [...affected2];
  replica.groupAfter = (await assignment()).map((m) => m.partitions.sort((a, b) => a - b));
  report('replica', replica);

  const clean = [leader, replica].every((r) => r.lost === 0 && r.orderViolations === 0);
  await mkdir(RESULTS_DIR, { recursive: true });
  await writeFile(
    join(RESULTS_DIR, 'kafka-cluster.json'),
    `${JSON.stringify({ benchmark: 'kafka-cluster', date: new Date().toISOString(), node: process.version, settings: { ...opts, pgUrl: undefined, redisUrl: undefined }, leader, replica, clean }, null, 2)}\n`,
  );
  log(`\n  ${clean ? 'PASS: 0 lost, order kept per workspace' : 'FAIL'}; results in bench/results/kafka-cluster.json`);
  if (!clean) for (const line of hub.logTail()) console.error(`  hub log: ${line}`);
  return clean ? 0 : 1;
}

function report(part, r) {
  log(`[${part}] sent ${fmt(r.sent)}, accepted ${fmt(r.accepted)} (failed calls ${r.failedCalls}${r.failedCalls ? `: ${r.failedCallErrors.join('; ')}` : ''}), delivered ${fmt(r.delivered)}, lost ${r.lost}, duplicate requests ${r.duplicates}, order violations ${r.orderViolations}`);
  log(`[${part}] time to recover (SIGKILL → first webhook of a later call on the dead node's partitions) ${r.recoverMs ?? 'n/a'} ms; longest call ${fmt(r.longestCallMs)} ms; burst ${fmt(r.burstMs)} ms${r.newLeaders ? `; new leaders ${r.newLeaders.join(', ')}` : ''}`);
}

function sleep(ms) {
  return new Promise((ok) => setTimeout(ok, ms));
}

await runBench(run);
