import pg from 'pg';
import { backends } from '@agenthub/testing';
import { startTestHub, type Agent, type RpcReply, type TestHub } from './harness.js';
import { splitMode, type SplitProcessName, type SplitStack } from './split-hub.js';

/**
 * README "Shutdown": SIGTERM drains in-flight calls for up to HUB_SHUTDOWN_GRACE_MS. A process
 * stopped while a call runs on it answers that call (not an error), turns /readyz 503 at once,
 * takes no new call (another replica serves it, or the caller is told the service is unavailable),
 * and exits 0 as soon as nothing is in flight. The gateway, then each gRPC service kind:
 * secrets, events, workspace and identity, on one split stack. (Messaging: split.e2e.test.ts.)
 */

/** Long, so that a process waiting out its grace instead of exiting once idle is told apart. */
const GRACE_MS = 30_000;
/**
 * How soon after its last call is answered a stopping process must be gone: a third of the grace,
 * wide enough for a machine busy with other suites (it exits within about 0.1 s when quiet).
 */
const EXIT_AFTER_IDLE_MS = 10_000;
/** Bound of every wait for something the test caused (a query reaching its lock, readiness turning). */
const SIGNAL_MS = 20_000;

async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + SIGNAL_MS;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`Not within ${SIGNAL_MS} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * Fails unless the process exited within EXIT_AFTER_IDLE_MS of `lastAnswer`, telling what its own
 * log says of the stop (process.ts and serviceProcess log each phase at info).
 */
function expectPromptExit(proc: { name: string; output(): string }, lastAnswer: number, exitedAt: number): void {
  const idleToExit = exitedAt - lastAnswer;
  if (idleToExit < EXIT_AFTER_IDLE_MS) return;
  const phases = proc.output().split('\n').filter((line) => /"msg":"(stopping|calls drained|stopped)"/.test(line));
  throw new Error(`${proc.name} exited ${idleToExit} ms after its last call was answered (bound ${EXIT_AFTER_IDLE_MS} ms); its log of the stop:\n${phases.join('\n')}`);
}

/** A stop, with when SIGTERM was sent and when the process was gone. */
function stopTimed(hub: SplitStack, name: SplitProcessName) {
  const signalledAt = Date.now();
  return hub.processes[name].stop('SIGTERM').then((exit) => ({ exit, signalledAt, exitedAt: Date.now() }));
}

const real = backends().find((b) => b.name === 'postgres+redis');
(real ? describe : describe.skip)('processes drain on SIGTERM (split)', () => {
  let hub: TestHub & SplitStack;
  /** Sees which process's query waits for a lock (split-hub.ts names sessions agenthub-<process>). */
  let observer: pg.Client;

  beforeAll(async () => {
    hub = await startTestHub(splitMode(real!), { HUB_SHUTDOWN_GRACE_MS: String(GRACE_MS), LOG_LEVEL: 'info' });
    observer = new pg.Client({ connectionString: hub.databaseUrl });
    await observer.connect();
  }, 240_000);
  afterAll(async () => {
    await observer?.end();
    await hub?.stop();
  }, 120_000);

  it('a gateway replica: a blocking send in flight completes; the process exits 0 once it is answered', async () => {
    const sender = await hub.agent('acme', 'drain-gw-sender');
    const recipient = await hub.agent('acme', 'drain-gw-recipient');
    const replica = await hub.addGateway();
    const blocking = fetch(`${replica.url}/a2a`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${sender.api_key}` },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'SendMessage',
        params: { message: { role: 'user', parts: [{ kind: 'text', text: 'wait for me' }] }, configuration: { agentId: recipient.agent_id, blocking: true } },
      }),
    }).then(async (r) => ({ status: r.status, body: (await r.json()) as { result?: any; error?: unknown }, answeredAt: Date.now() }));
    // The delivery in the recipient's inbox is the signal that the send reached messaging and now waits.
    let taskId: string | undefined;
    for (let i = 0; i < 30 && !taskId; i += 1) {
      const { deliveries } = await hub.ok(recipient.api_key, 'x-hub/inbox.poll', { wait_ms: 2000 });
      taskId = deliveries[0]?.task_id;
    }
    expect(taskId).toEqual(expect.any(String));
    const signalledAt = Date.now();
    const exited = replica.process.stop('SIGTERM').then((exit) => ({ exit, exitedAt: Date.now() }));
    // Readiness turns 503 at once, so a load balancer stops sending it new calls while it drains.
    for (let status = 200; status === 200; ) status = (await fetch(`${replica.url}/readyz`).catch(() => ({ status: 0 }))).status;
    await hub.ok(recipient.api_key, 'x-hub/tasks.update', { task_id: taskId, state: 'completed' });
    const reply = await blocking;
    expect(reply.status).toBe(200);
    expect(reply.body.error).toBeUndefined();
    expect(reply.body.result).toMatchObject({ id: taskId, status: { state: 'completed' } });
    const { exit, exitedAt } = await exited;
    expect(exit).toEqual({ code: 0, signal: null });
    // Once the send is answered nothing is in flight: the kept-alive connection it came on does
    // not hold the process for the rest of the grace (it did, until the grace ran out).
    expectPromptExit(replica.process, reply.answeredAt, exitedAt);
    expect(exitedAt - signalledAt).toBeLessThan(GRACE_MS);
  }, 120_000);

  describe('gRPC services', () => {
    let owner: Agent;
    let workspaceId: string;

    beforeAll(async () => {
      owner = await hub.agent('acme', 'drain-owner');
      workspaceId = (await hub.ok(owner.api_key, 'x-hub/workspace.create', { name: 'drained' })).workspace.id;
      await hub.ok(owner.api_key, 'x-hub/workspace.secrets.set', { workspace_id: workspaceId, key: 'K', value: 'v' });
    }, 60_000);

    /**
     * Each case: a call that reads `table` in the service's database with a query like `query`
     * (other sessions read those tables too: the events delivery worker every second, the
     * gateway's tenant limit look-ups), and what a new call gets while the process drains.
     * Ordered so that each service still has what it calls (workspace for secrets and events;
     * identity last, the gateway's API key cache covering the rest).
     */
    const cases: { process: SplitProcessName; table: string; query: string; call: () => Promise<RpcReply>; whileDraining: 'refused' | 'served' }[] = [
      {
        process: 'secrets',
        table: 'secrets.secrets',
        query: '%FROM secrets WHERE workspace_id%',
        call: () => hub.call(owner.api_key, 'x-hub/workspace.secrets.list', { workspace_id: workspaceId }),
        whileDraining: 'refused',
      },
      {
        process: 'events',
        table: 'events.webhooks',
        query: '%FROM webhooks%workspace_deleted_at IS NULL AND%',
        call: () => hub.call(owner.api_key, 'x-hub/webhooks.list', { workspace_id: workspaceId }),
        whileDraining: 'refused',
      },
      // Two replicas: the other one serves what the stopping one no longer takes.
      { process: 'workspace-a', table: 'workspace.workspaces', query: '%FROM members m JOIN workspaces w%', call: () => hub.call(owner.api_key, 'x-hub/workspace.list'), whileDraining: 'served' },
      { process: 'identity', table: 'identity.tenants', query: '%FROM tenants ORDER BY id%', call: () => hub.call(hub.adminToken, 'tenants.list', {}, { path: '/admin' }), whileDraining: 'refused' },
    ];

    it.each(cases.map((c) => [c.process, c] as const))('%s: a call in flight completes, new calls go elsewhere, the process exits 0 once idle', async (name, c) => {
      // The table held locked keeps a call that reads it waiting inside the service: in flight,
      // and seen there (its session waits for the lock), with no sleep standing for it.
      const locker = new pg.Client({ connectionString: hub.databaseUrl });
      await locker.connect();
      let locked = false;
      try {
        await locker.query('BEGIN');
        await locker.query(`LOCK TABLE ${c.table} IN ACCESS EXCLUSIVE MODE`);
        locked = true;
        /** Sessions of the processes named by `pattern` (LIKE) waiting for a lock in the case's query. */
        const lockWaits = async (pattern: string) =>
          (
            await observer.query<{ n: number }>(
              "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name LIKE $1 AND wait_event_type = 'Lock' AND query LIKE $2",
              [pattern, c.query],
            )
          ).rows[0]!.n;
        const answered = (call: Promise<RpcReply>) => call.then((reply) => ({ reply, answeredAt: Date.now() }));
        const before = await lockWaits('agenthub-%');
        // Round-robin over replicas: calls until one waits in this process.
        const inFlight: ReturnType<typeof answered>[] = [];
        do {
          inFlight.push(answered(c.call()));
          await until(`${inFlight.length} call(s) waiting on ${c.table}`, async () => (await lockWaits('agenthub-%')) >= before + inFlight.length);
        } while ((await lockWaits(`agenthub-${name}`)) === 0 && inFlight.length < 4);
        expect(await lockWaits(`agenthub-${name}`)).toBeGreaterThan(0);

        const stopped = stopTimed(hub, name);
        await until(`${name} /readyz 503`, async () => (await fetch(`${hub.processes[name].opsUrl}/readyz`).catch(() => ({ status: 0 }))).status === 503);
        const late = answered(c.call());
        if (c.whileDraining === 'refused') {
          // The only replica takes no new call: the caller hears the service is unavailable, at once.
          const { reply } = await late;
          expect(reply.body.error).toMatchObject({ code: -32603, data: { reason: 'unavailable' } });
        }
        await locker.query('COMMIT');
        locked = false;
        const replies = await Promise.all([...inFlight, ...(c.whileDraining === 'served' ? [late] : [])]);
        for (const { reply } of replies) {
          expect(reply.status).toBe(200);
          expect(reply.body.error).toBeUndefined();
          expect(reply.body.result).toEqual(expect.any(Object));
        }
        const { exit, signalledAt, exitedAt } = await stopped;
        expect(exit).toEqual({ code: 0, signal: null });
        expect(exitedAt - signalledAt).toBeLessThan(GRACE_MS);
        expectPromptExit(hub.processes[name], Math.max(...replies.map((r) => r.answeredAt)), exitedAt);
      } finally {
        if (locked) await locker.query('ROLLBACK');
        await locker.end();
      }
    }, 90_000);
  });
});
