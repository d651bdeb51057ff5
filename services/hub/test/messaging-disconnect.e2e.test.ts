import { hubModes, startTestHub, type Agent, type TestHub } from './harness.js';

/**
 * An agent whose client gives up on `x-hub/inbox.poll`, or hangs up `x-hub/inbox.stream`, leaves
 * nothing behind on the server: the abandoned call claims no delivery, so the next message reaches
 * the agent's next poll at once as attempt 1, not after MESSAGING_CLAIM_MS as attempt 2.
 */

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** Long enough for the dropped request to reach the hub and wait there; shorter only lets a broken hub pass. */
const SETTLE_MS = 1_000;

describe.each(hubModes().map((m) => [m.name, m] as const))('a client that goes away mid-wait (%s)', (_name, backend) => {
  let hub: TestHub;
  let sender: Agent;

  beforeAll(async () => {
    hub = await startTestHub(backend);
    sender = await hub.agent('acme', 'sender');
  });
  afterAll(() => hub?.stop());

  const text = (t: string) => ({ kind: 'text', text: t });

  /** Starts a waiting call as `who` and hangs up once it is waiting on the hub. */
  async function dropMidWait(who: Agent, method: string, params: unknown) {
    const controller = new AbortController();
    const pending = fetch(`${hub.url}/a2a`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${who.api_key}` },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
      signal: controller.signal,
    }).then((response) => response.body?.getReader().read());
    await sleep(SETTLE_MS);
    controller.abort();
    await pending.catch(() => undefined);
  }

  async function expectPromptDelivery(recipient: Agent) {
    const task = await hub.ok(sender.api_key, 'SendMessage', { message: { role: 'user', parts: [text('after the drop')] }, configuration: { agentId: recipient.agent_id } });
    const started = Date.now();
    const { deliveries } = await hub.ok(recipient.api_key, 'x-hub/inbox.poll', { wait_ms: 5_000 });
    expect(deliveries.map((d: any) => [d.task_id, d.attempt])).toEqual([[task.id, 1]]);
    // Well inside the 30 s claim window an abandoned claim would hold it for.
    expect(Date.now() - started).toBeLessThan(5_000);
  }

  it('a long poll dropped mid-wait claims nothing: the next message comes at once as attempt 1', async () => {
    const recipient = await hub.agent('acme', 'poller');
    await dropMidWait(recipient, 'x-hub/inbox.poll', { wait_ms: 25_000 });
    await expectPromptDelivery(recipient);
  }, 30_000);

  it('an inbox stream closed mid-wait claims nothing: the next message comes at once as attempt 1', async () => {
    const recipient = await hub.agent('acme', 'streamer');
    await dropMidWait(recipient, 'x-hub/inbox.stream', {});
    await expectPromptDelivery(recipient);
  }, 30_000);
});
