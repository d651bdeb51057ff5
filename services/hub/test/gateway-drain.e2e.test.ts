import { backends } from '@agenthub/testing';
import { startTestHub, type TestHub } from './harness.js';
import { splitMode, type SplitStack } from './split-hub.js';

/**
 * README "Shutdown": SIGTERM drains in-flight calls for up to HUB_SHUTDOWN_GRACE_MS. A gateway
 * replica stopped while a blocking SendMessage waits on it answers that call with the task's end
 * (not an error), turns /readyz 503 meanwhile, and exits 0. (Messaging replicas: split.e2e.test.ts.)
 */
const real = backends().find((b) => b.name === 'postgres+redis');
(real ? describe : describe.skip)('a gateway replica drains on SIGTERM (split)', () => {
  let hub: TestHub & SplitStack;

  beforeAll(async () => {
    hub = await startTestHub(splitMode(real!), { HUB_SHUTDOWN_GRACE_MS: '8000' });
  }, 240_000);
  afterAll(() => hub?.stop(), 120_000);

  it('a blocking send in flight on the stopping gateway completes; the process exits 0', async () => {
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
    }).then(async (r) => ({ status: r.status, body: (await r.json()) as { result?: any; error?: unknown } }));
    // The delivery in the recipient's inbox is the signal that the send reached messaging and now waits.
    let taskId: string | undefined;
    for (let i = 0; i < 30 && !taskId; i += 1) {
      const { deliveries } = await hub.ok(recipient.api_key, 'x-hub/inbox.poll', { wait_ms: 2000 });
      taskId = deliveries[0]?.task_id;
    }
    expect(taskId).toEqual(expect.any(String));
    const exited = replica.process.stop('SIGTERM');
    // Readiness turns 503 at once, so a load balancer stops sending it new calls while it drains.
    for (let status = 200; status === 200; ) status = (await fetch(`${replica.url}/readyz`).catch(() => ({ status: 0 }))).status;
    await hub.ok(recipient.api_key, 'x-hub/tasks.update', { task_id: taskId, state: 'completed' });
    const reply = await blocking;
    expect(reply.status).toBe(200);
    expect(reply.body.error).toBeUndefined();
    expect(reply.body.result).toMatchObject({ id: taskId, status: { state: 'completed' } });
    expect(await exited).toEqual({ code: 0, signal: null });
  }, 120_000);
});
