import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ProvisionedBackend } from '@agenthub/testing';
import { hubModes } from './harness.js';
import { freePort, startHubProcess, type HubProcess } from './hub-process.js';
import { startSplitStack, type SplitStack } from './split-hub.js';
import { WebhookReceiver } from './webhook-receiver.js';

/**
 * Crash safety: a real hub process is SIGKILLed (no shutdown hook runs) in the middle of a burst
 * of SendMessage calls and workspace changes, then started again on the same data. Every send that
 * returned a task is delivered to its recipient, every change that was acknowledged reaches its
 * webhook (at least once: duplicates are counted, not refused), and every task is still in a state
 * it could be in. The figures are printed on one line per backend. In split mode one messaging
 * replica and the events service are the processes killed; the gateway and the rest stay up.
 */

const SENDS = 200;
const CHANGES = 60;
const CONCURRENCY = 8;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** The hub is killed once this many sends have been acknowledged: mid-burst. */
const KILL_AFTER_SENDS = 60;

interface Reply {
  result?: any;
  error?: { code: number; message: string };
}

async function rpc(url: string, key: string, method: string, params: unknown, path = '/a2a'): Promise<Reply> {
  const response = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    signal: AbortSignal.timeout(30_000),
  });
  return (await response.json()) as Reply;
}

async function ok(url: string, key: string, method: string, params: unknown, path?: string): Promise<any> {
  const reply = await rpc(url, key, method, params, path);
  if (reply.error || reply.result === undefined) throw new Error(`${method} failed: ${JSON.stringify(reply.error)}`);
  return reply.result;
}

/** Runs `count` calls, `CONCURRENCY` at a time; returns the indexes whose call returned a result. */
async function burst(count: number, one: (i: number) => Promise<boolean>): Promise<Set<number>> {
  const acked = new Set<number>();
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < count) {
        const i = next++;
        // A call cut off by the kill (connection reset or refused) is neither acknowledged nor counted.
        if (await one(i).catch(() => false)) acked.add(i);
      }
    }),
  );
  return acked;
}

/** A hub under test, as the scenario sees it: where to call it, how to crash it, how to bring it back. */
interface Crashable {
  url(): string;
  adminToken: string;
  /** SIGKILLs the process(es) this mode crashes; resolves once they are gone. */
  crash(): Promise<void>;
  /** Starts what crash() killed on the same data; resolves once it is ready. */
  recover(): Promise<void>;
  close(): Promise<void>;
}

/** `agenthub serve all` on `provisioned` (PGlite in `dataDir` when it names no database). */
async function allInOne(provisioned: ProvisionedBackend, dataDir: string, env: Record<string, string>): Promise<Crashable> {
  const settings: Record<string, string> = {
    HUB_PORT: String(await freePort()),
    HUB_DATA_DIR: dataDir,
    ...env,
    ...(provisioned.databaseUrl ? { DATABASE_URL: provisioned.databaseUrl } : {}),
    ...(provisioned.redisUrl ? { REDIS_URL: provisioned.redisUrl, REDIS_PREFIX: provisioned.redisPrefix } : {}),
  };
  let hub: HubProcess = await startHubProcess(settings);
  return {
    url: () => hub.url,
    adminToken: env.HUB_ADMIN_TOKEN!,
    async crash() {
      await hub.kill('SIGKILL');
      expect(hub.child.signalCode).toBe('SIGKILL');
    },
    async recover() {
      hub = await startHubProcess(settings);
    },
    close: () => hub.kill('SIGKILL'),
  };
}

/** Split mode: one process per service, two messaging replicas; messaging-a and events are crashed. */
async function split(provisioned: ProvisionedBackend, dataDir: string, env: Record<string, string>): Promise<Crashable> {
  const stack: SplitStack = await startSplitStack(provisioned, { HUB_DATA_DIR: dataDir, ...env });
  const crashed = ['messaging-a', 'events'] as const;
  return {
    url: () => stack.url,
    adminToken: stack.adminToken,
    async crash() {
      const exits = await Promise.all(crashed.map((name) => stack.processes[name].stop('SIGKILL')));
      expect(exits.map((e) => e.signal)).toEqual(['SIGKILL', 'SIGKILL']);
    },
    async recover() {
      await Promise.all(crashed.map((name) => stack.respawn(name)));
    },
    close: () => stack.stop(),
  };
}

const modes = hubModes().map((mode) => [mode.name, mode] as const);

describe.each(modes)('a hub SIGKILLed mid-burst (%s)', (name, mode) => {
  it('loses no acknowledged send and no acknowledged workspace change', async () => {
    const provisioned = await mode.provision();
    const dataDir = await mkdtemp(join(tmpdir(), 'agenthub-crash-'));
    const receiver = await WebhookReceiver.start();
    const env: Record<string, string> = {
      HUB_ADMIN_TOKEN: `crash-admin-${randomBytes(12).toString('hex')}`,
      HUB_KEKS: `v1:${randomBytes(32).toString('base64')}`,
      HUB_EGRESS_ALLOW_PRIVATE: 'true',
      HUB_METRICS: 'false',
      WEBHOOK_TIMEOUT_MS: '2000',
      WEBHOOK_RETRY_SCHEDULE_MS: '0,200,400,800,1600,3200',
    };
    let hub: Crashable | undefined;
    try {
      hub = await (mode.name === 'split' ? split : allInOne)(provisioned, dataDir, env);
      const admin = hub.adminToken;
      const url = hub.url();
      const agent = async (agentName: string) => {
        const created = await ok(url, admin, 'agents.create', { tenant_id: 'acme', name: agentName, create_tenant: true }, '/admin');
        return { id: created.agent.id as string, key: created.api_key as string };
      };
      const sender = await agent('sender');
      const recipient = await agent('recipient');
      const workspaceId = (await ok(url, sender.key, 'x-hub/workspace.create', { name: 'Crashed' })).workspace.id;
      await ok(url, sender.key, 'x-hub/webhooks.create', { workspace_id: workspaceId, url: receiver.url('/crash') });

      // The burst: sends and workspace changes side by side; the kill lands once enough sends
      // were acknowledged, with calls of both kinds in flight.
      const taskOf = new Map<number, string>();
      let killed: Promise<void> | undefined;
      const target = hub;
      const sends = burst(SENDS, async (i) => {
        const reply = await rpc(url, sender.key, 'SendMessage', { message: { role: 'user', parts: [{ kind: 'text', text: `send ${i}` }] }, configuration: { agentId: recipient.id } });
        if (!reply.result?.id) return false;
        taskOf.set(i, reply.result.id);
        if (taskOf.size >= KILL_AFTER_SENDS) killed ??= target.crash();
        return true;
      });
      const changes = burst(CHANGES, async (i) => {
        const reply = await rpc(url, sender.key, 'x-hub/workspace.secrets.set', { workspace_id: workspaceId, key: `CRASH_${i}`, value: `v${i}` });
        return reply.result !== undefined;
      });
      const [sent, changed] = await Promise.all([sends, changes]);
      await (killed ?? target.crash());
      expect(sent.size).toBeGreaterThanOrEqual(KILL_AFTER_SENDS);

      if (mode.name === 'split') {
        // The gateway reports itself not ready while an upstream it needs is down, and ready again after.
        const down = await fetch(`${url}/readyz`);
        expect([down.status, ((await down.json()) as any).checks?.events]).toEqual([503, 'unreachable']);
      }
      await hub.recover();
      const after = hub.url();
      if (mode.name === 'split') {
        // Once its clients have reconnected (gRPC backs off between attempts).
        let ready: unknown;
        for (const until = Date.now() + 30_000; Date.now() < until; await sleep(250)) {
          const up = await fetch(`${after}/readyz`);
          ready = [up.status, ((await up.json()) as any).status];
          if (up.status === 200) break;
        }
        expect(ready).toEqual([200, 'ready']);
      }

      // Drain the recipient's inbox: nothing was claimed before the kill, so all of it is visible now.
      const ackedTasks = new Set([...sent].map((i) => taskOf.get(i)!));
      const deliveredCount = new Map<string, number>();
      const drainUntil = Date.now() + 30_000;
      while (Date.now() < drainUntil && [...ackedTasks].some((id) => !deliveredCount.has(id))) {
        const { deliveries } = await ok(after, recipient.key, 'x-hub/inbox.poll', { max: 100, wait_ms: 1_000 });
        for (const d of deliveries) {
          deliveredCount.set(d.task_id, (deliveredCount.get(d.task_id) ?? 0) + 1);
          await ok(after, recipient.key, 'x-hub/inbox.ack', { delivery_id: d.delivery_id });
        }
      }
      const lostSends = [...ackedTasks].filter((id) => !deliveredCount.has(id));
      const sendDuplicates = [...deliveredCount.values()].reduce((sum, n) => sum + n - 1, 0);

      // Every change acknowledged before the kill, and each event at least once (by webhook-id).
      const ackedKeys = new Set([...changed].map((i) => `CRASH_${i}`));
      const keysSeen = () => new Set(receiver.on('/crash').map((r) => r.body?.data?.key as string));
      await receiver
        .waitFor('every acknowledged change at its webhook', () => [...ackedKeys].every((k) => keysSeen().has(k)), 60_000)
        .catch(() => undefined);
      const requests = receiver.on('/crash');
      const seen = keysSeen();
      const lostChanges = [...ackedKeys].filter((k) => !seen.has(k));
      const hookDuplicates = requests.length - new Set(requests.map((r) => r.headers['webhook-id'])).size;

      console.log(
        `crash (${name}): sends acknowledged=${ackedTasks.size} delivered=${ackedTasks.size - lostSends.length} lost=${lostSends.length} duplicates=${sendDuplicates}; ` +
          `webhook changes acknowledged=${ackedKeys.size} delivered=${ackedKeys.size - lostChanges.length} lost=${lostChanges.length} duplicates=${hookDuplicates}`,
      );
      expect(lostSends).toEqual([]);
      expect(lostChanges).toEqual([]);

      // No task in an impossible state: each acknowledged one is still submitted (nobody worked
      // on it) and can be completed once.
      for (const id of ackedTasks) {
        expect((await ok(after, sender.key, 'GetTask', { id })).status.state).toBe('submitted');
      }
      for (const id of [...ackedTasks].slice(0, 5)) {
        await ok(after, recipient.key, 'x-hub/tasks.update', { task_id: id, state: 'completed' });
        expect((await ok(after, sender.key, 'GetTask', { id })).status.state).toBe('completed');
      }
    } finally {
      await hub?.close();
      await receiver.close();
      await provisioned.dispose();
      await rm(dataDir, { recursive: true, force: true });
    }
  }, 240_000);
});
