import { hubModes, startTestHub, type Agent, type TestHub } from './harness.js';

/**
 * The whole hub restarted with deliveries queued, over real HTTP: every queued message is still
 * delivered afterwards, none that was acknowledged comes back, and one handed out but not
 * acknowledged comes back under the same delivery id. Tasks keep their state across the restart.
 */

const CLAIM_MS = 1000;

describe.each(hubModes().map((m) => [m.name, m] as const))('restart with queued deliveries (%s)', (_name, backend) => {
  let hub: TestHub;
  let sender: Agent;
  let recipient: Agent;

  beforeAll(async () => {
    hub = await startTestHub(backend, { MESSAGING_CLAIM_MS: String(CLAIM_MS), HUB_EMBEDDED_STORAGE: 'disk' });
    sender = await hub.agent('acme', 'sender');
    recipient = await hub.agent('acme', 'recipient');
  });
  afterAll(() => hub?.stop());

  const text = (t: string) => ({ kind: 'text', text: t });

  it('loses nothing and redelivers only what was not acknowledged, under its id', async () => {
    const taskIds: string[] = [];
    for (const word of ['one', 'two', 'three', 'four']) {
      const task = await hub.ok(sender.api_key, 'SendMessage', { message: { role: 'user', parts: [text(word)] }, configuration: { agentId: recipient.agent_id } });
      expect(task.status.state).toBe('submitted');
      taskIds.push(task.id);
    }
    const before = (await hub.ok(recipient.api_key, 'x-hub/inbox.poll', { max: 2 })).deliveries;
    expect(before.map((d: any) => d.message.parts[0].text)).toEqual(['one', 'two']);
    expect(await hub.ok(recipient.api_key, 'x-hub/inbox.ack', { delivery_id: before[0].delivery_id })).toEqual({ acked: true });

    hub = await hub.restart();

    for (const id of taskIds) expect((await hub.ok(sender.api_key, 'GetTask', { id })).status.state).toBe('submitted');
    // After the claim window the unacknowledged "two" is handed out again; "one" never is.
    const after = new Map<string, any>();
    for (let i = 0; i < 50 && after.size < 3; i += 1) {
      const { deliveries } = await hub.ok(recipient.api_key, 'x-hub/inbox.poll', { wait_ms: CLAIM_MS, max: 10 });
      for (const d of deliveries) if (!after.has(d.delivery_id)) after.set(d.delivery_id, d);
    }
    const redelivered = [...after.values()].map((d) => [d.message.parts[0].text, d.attempt]);
    expect(redelivered.sort()).toEqual([['four', 1], ['three', 1], ['two', 2]]);
    expect(after.has(before[1].delivery_id)).toBe(true);
    expect(after.has(before[0].delivery_id)).toBe(false);

    for (const d of after.values()) {
      await hub.ok(recipient.api_key, 'x-hub/tasks.update', { task_id: d.task_id, state: 'completed', artifacts: [{ parts: [text(`done ${d.message.parts[0].text}`)] }] });
      await hub.ok(recipient.api_key, 'x-hub/inbox.ack', { delivery_id: d.delivery_id });
    }
    const finished = await Promise.all(taskIds.slice(1).map((id) => hub.ok(sender.api_key, 'GetTask', { id })));
    expect(finished.map((t) => [t.status.state, t.artifacts[0].parts[0].text])).toEqual([
      ['completed', 'done two'],
      ['completed', 'done three'],
      ['completed', 'done four'],
    ]);
    // Nothing is left queued.
    expect((await hub.ok(recipient.api_key, 'x-hub/inbox.poll', { wait_ms: CLAIM_MS + 200 })).deliveries).toEqual([]);
  });
});
