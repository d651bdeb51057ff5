import { egressPolicy, Metrics, newId, type Db } from '@agenthub/runtime';
import { PushStore } from '../src/push-store.js';
import { backends, testLogger } from '@agenthub/testing';
import { startPushWorker, type IdentityClient, type MessagingEnv } from '../src/index.js';
import { startEchoAgent, type EchoAgent } from './echo-agent.js';
import { eventually, newTaskRecord, openMessagingEnv, startTarpit } from './push-stack.js';

/**
 * Issue 16 item 4, on one replica (no other replica to take up what it leaves): the shares of its
 * push slots hold however many agents one claim brings, and a slow agent leaves room for the
 * other agents of its tenant. Each test runs its own worker with the shares it names; a call
 * times out after 10 s, so a delivery that waited for a tarpit's slot would take that long.
 */

/** The test's own store calls run to completion. */
const signal = new AbortController().signal;
const agents = new Map<string, string>();
/** Identity as the worker asks it: each agent's tenant (senders are of the same tenant); `connected_` agents have no endpoint. */
const identity = {
  getAgent: async ({ agentId }: { agentId: string }) => ({
    agent: { id: agentId, tenantId: agents.get(agentId) ?? 'none', endpointUrl: agentId.startsWith('connected_') ? '' : 'x' },
  }),
  checkGrant: async () => ({ approved: true }),
} as unknown as IdentityClient;

describe.each(backends().map((b) => [b.name, b] as const))('push slot shares on one replica (%s)', (_name, backend) => {
  let opened: Awaited<ReturnType<typeof openMessagingEnv>>;
  let db: Db;
  let env: MessagingEnv;
  const closing: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    opened = await openMessagingEnv(backend, identity);
    ({ db, env } = opened);
  });
  afterAll(async () => {
    for (const close of closing.reverse()) await close();
    await opened?.close();
  });

  /** A push agent of `tenantId` at `url` with `count` queued messages; the ids of their tasks. */
  async function queue(tenantId: string, url: string, count: number): Promise<string[]> {
    const agentId = newId('agent');
    agents.set(agentId, tenantId);
    await env.pushes.recordPushAgent(signal, agentId, url, tenantId);
    const ids: string[] = [];
    for (let n = 0; n < count; n += 1) {
      const message = { role: 'user', messageId: newId('msg'), parts: [{ text: { text: `message ${n}` } }] };
      const task = await env.tasks.createTask(
        signal,
        newTaskRecord({ id: newId('task'), contextId: newId('ctx'), senderAgentId: 'agent_sender', senderTenantId: tenantId, recipientAgentId: agentId, state: 'submitted', messages: [message] }),
        { id: newId('dlv'), message, expiresAt: Date.now() + 60_000, recipientTenantId: tenantId },
      );
      ids.push(task.created!.id);
    }
    return ids;
  }

  function worker(options: { concurrency: number; perTenant: number; perAgent: number }) {
    const stop = startPushWorker(env, {
      log: testLogger(),
      metrics: new Metrics(),
      policy: egressPolicy(true),
      credentials: async () => '',
      options: { ...options, pollMs: 50, timeoutMs: 10_000, maxBackoffMs: 200, minBackoffMs: 50 },
    });
    return stop;
  }

  const completed = async (ids: string[]) => (await Promise.all(ids.map((id) => env.tasks.getTask(signal, id, false)))).every((t) => t?.state === 'completed');

  it("the agents of one tenant hold at most its share, however many of them one claim brings", async () => {
    const tarpits = await Promise.all([0, 1, 2, 3].map(() => startTarpit()));
    for (const tarpit of tarpits) closing.push(() => tarpit.close());
    // Queued before the worker starts: its first claim finds all four agents at once.
    for (const tarpit of tarpits) await queue('crowd', tarpit.url, 2);
    const stop = worker({ concurrency: 8, perTenant: 2, perAgent: 2 });
    try {
      await eventually(async () => tarpits.reduce((sum, t) => sum + t.load.now, 0) === 2, 'the share to be taken');
      // Another tenant still gets the rest.
      const remote: EchoAgent = await startEchoAgent('echo');
      closing.push(() => remote.stop());
      const quick = await queue('other', remote.url, 3);
      await eventually(() => completed(quick), "the other tenant's tasks to complete");
      expect(tarpits.reduce((sum, t) => sum + t.load.max, 0)).toBeLessThanOrEqual(2);
    } finally {
      await stop();
      // The tarpits' messages stay queued; the next test's worker is not to meet them.
      await db.query('DELETE FROM deliveries');
    }
  });

  it("a tarpit agent leaves room for its tenant's other agents", async () => {
    const tarpit = await startTarpit();
    closing.push(() => tarpit.close());
    await queue('family', tarpit.url, 4);
    const stop = worker({ concurrency: 8, perTenant: 4, perAgent: 2 });
    try {
      await eventually(async () => tarpit.load.now === 2, 'the tarpit to hold its share');
      const remote: EchoAgent = await startEchoAgent('echo');
      closing.push(() => remote.stop());
      const started = performance.now();
      const quick = await queue('family', remote.url, 3);
      await eventually(() => completed(quick), "the sibling agent's tasks to complete");
      // Well inside the 10 s a call to the tarpit takes to time out.
      expect(performance.now() - started).toBeLessThan(5_000);
      expect(tarpit.load.max).toBe(2);
    } finally {
      await stop();
    }
  });

  it('a send to a connected agent is no work for the push worker of its replica: it runs no claim', async () => {
    let claims = 0;
    let finished = 0;
    class Counting extends PushStore {
      override async claimPushAgents(...args: Parameters<PushStore['claimPushAgents']>) {
        claims += 1;
        try {
          return await super.claimPushAgents(...args);
        } finally {
          finished += 1;
        }
      }
    }
    // No poll within the test: only wake-ups make passes.
    const stop = startPushWorker({ ...env, pushes: new Counting(db) }, {
      log: testLogger(),
      metrics: new Metrics(),
      policy: egressPolicy(true),
      credentials: async () => '',
      options: { pollMs: 600_000 },
    });
    let stopped = false;
    try {
      await eventually(async () => finished === 1, 'the first pass');
      // The wake-ups of five sends to connected agents, then one to a push agent, in one turn.
      for (let n = 0; n < 5; n += 1) env.wakes.wake(`connected_${n}`, testLogger());
      env.wakes.wake(newId('agent'), testLogger());
      await eventually(async () => finished >= 2, "the push agent's pass");
      // Stopping waits for the pass in flight, and one asked for meanwhile has begun by then.
      await stop();
      stopped = true;
      expect(claims).toBe(2);
    } finally {
      if (!stopped) await stop();
    }
  });
});
