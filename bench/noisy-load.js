// The noisy tenant's load for bench/noisy-tenant.js, in a worker thread of its own: a tenant is
// another client, and sharing the quiet tenant's event loop would add the noisy sender's own
// work (hundreds of requests a second) to the quiet tenant's measured latencies.
import http from 'node:http';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { rpc } from './lib.js';

/**
 * Sends one `x-hub/workspace.get` every 1/rate seconds for `seconds`, not waiting for answers
 * (open loop: a slow hub does not slow the sender down). Returns each call's latency, status and
 * when it was sent (`performance.now()` of the calling thread).
 * Plain `node:http` over kept-alive connections: `fetch` costs the sender several times the CPU
 * per call, which on a small machine is taken from the hub under test.
 */
export async function openLoop(url, key, workspaceId, rate, seconds) {
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'x-hub/workspace.get', params: { workspace_id: workspaceId } });
  const target = new URL('/a2a', url);
  const agent = new http.Agent({ keepAlive: true });
  const options = {
    host: target.hostname,
    port: target.port,
    path: target.pathname,
    method: 'POST',
    agent,
    headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), authorization: `Bearer ${key}` },
  };
  const pending = [];
  const start = performance.now();
  const total = Math.round(rate * seconds);
  for (let i = 0; i < total; i++) {
    const due = start + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((ok) => setTimeout(ok, wait));
    const sent = performance.now();
    pending.push(
      new Promise((done) => {
        const request = http.request(options, (response) => {
          response.resume();
          response.once('end', () => done({ ms: performance.now() - sent, status: response.statusCode, sent }));
        });
        request.once('error', () => done({ ms: performance.now() - sent, status: 0, sent }));
        request.end(body);
      }),
    );
  }
  const results = await Promise.all(pending);
  agent.destroy();
  return results;
}

/** Causes one webhook event per call, alternately adding and removing `peerId` in a workspace. */
export function memberToggler(url, key, peerId) {
  const member = new Map();
  return async (workspaceId) => {
    const inside = member.get(workspaceId) === true;
    member.set(workspaceId, !inside);
    const [method, params] = inside
      ? ['x-hub/workspace.members.remove', { workspace_id: workspaceId, agent_id: peerId }]
      : ['x-hub/workspace.members.add', { workspace_id: workspaceId, agent_id: peerId, role: 'read' }];
    const reply = await rpc(url, '/a2a', key, method, params);
    if (reply.error) throw new Error(`${method}: ${JSON.stringify(reply.error)}`);
  };
}

/** Calls `cause(i)` at `rate` a second for `seconds`, each after the previous; returns when each was done. */
export async function drive(rate, seconds, cause) {
  const done = [];
  const start = performance.now();
  for (let i = 0; i < Math.round(rate * seconds); i++) {
    const wait = start + (i * 1000) / rate - performance.now();
    if (wait > 1) await new Promise((ok) => setTimeout(ok, wait));
    await cause(i);
    done.push(performance.now());
  }
  return done;
}

/**
 * Runs one noisy load in a worker thread and resolves with its result: `{ kind: 'calls', url,
 * key, workspaceId, rate, seconds }` (openLoop's results) or `{ kind: 'events', url, key, peerId,
 * workspaceIds, rate, seconds }` (the number of events caused).
 */
export function inWorker(job) {
  return new Promise((resolve, reject) => {
    const worker = new Worker(new URL(import.meta.url), { workerData: job });
    worker.once('message', resolve);
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`the noisy load's worker exited (${code}) without a result`)));
  });
}

if (!isMainThread) {
  const job = workerData;
  if (job.kind === 'calls') {
    parentPort.postMessage(await openLoop(job.url, job.key, job.workspaceId, job.rate, job.seconds));
  } else {
    const toggle = memberToggler(job.url, job.key, job.peerId);
    const done = await drive(job.rate, job.seconds, (i) => toggle(job.workspaceIds[i % job.workspaceIds.length]));
    parentPort.postMessage(done.length);
  }
}
