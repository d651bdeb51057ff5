import { hubModes, startTestHub, type Agent, type TestHub } from './harness.js';
import { verifySignature, WebhookReceiver, type Received } from './webhook-receiver.js';

/**
 * Issue 14 item 8: agent-wide webhooks (`scope: "agent"`) over HTTP on every backend. One
 * subscription covers every workspace its creator owns or administers, including ones created
 * after it, so `workspace.created` is delivered; signed as any webhook (verified here with
 * node:crypto), with deliveries and replay. Every wait is a bounded poll for a condition.
 */
describe.each(hubModes().map((m) => [m.name, m] as const))('agent-wide webhooks (%s)', (_name, backend) => {
  let hub: TestHub;
  let receiver: WebhookReceiver;
  let owner: Agent;
  let colleague: Agent;

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    hub = await startTestHub(backend, { HUB_EGRESS_ALLOW_PRIVATE: 'true', WEBHOOK_RETRY_SCHEDULE_MS: '0,200,400' });
    owner = await hub.agent('acme', 'owner');
    colleague = await hub.agent('acme', 'colleague');
  });
  afterAll(async () => {
    await hub?.stop();
    await receiver?.close();
  });

  let n = 0;
  const path = () => `/agent-hooks/${Date.now()}-${n++}`;
  const events = (at: string) => receiver.on(at).map((r: Received) => [r.body?.event, r.body?.data?.workspace_id]);

  it('delivers workspace.created and later events of the creator\'s new workspaces, and nothing of others\'', async () => {
    const at = path();
    const { webhook } = await hub.ok(owner.api_key, 'x-hub/webhooks.create', { scope: 'agent', url: receiver.url(at) });
    expect(webhook).toMatchObject({ workspace_id: null, url: receiver.url(at), enabled: true, secret: expect.stringMatching(/^whsec_/) });

    const mine = (await hub.ok(owner.api_key, 'x-hub/workspace.create', { name: 'later' })).workspace.id;
    const theirs = (await hub.ok(colleague.api_key, 'x-hub/workspace.create', { name: 'not mine' })).workspace.id;
    // The colleague's own webhook tells when the events service has taken its workspace's event.
    const witness = path();
    await hub.ok(colleague.api_key, 'x-hub/webhooks.create', { workspace_id: theirs, url: receiver.url(witness) });
    await hub.ok(colleague.api_key, 'x-hub/workspace.store', { workspace_id: theirs, content: 'private to colleague' });
    await receiver.waitFor('the colleague\'s event taken', () => receiver.on(witness).length >= 1);
    await hub.ok(owner.api_key, 'x-hub/workspace.store', { workspace_id: mine, content: 'a fact' });

    await receiver.waitFor('two events', () => receiver.on(at).length >= 2);
    expect(events(at)).toEqual([
      ['workspace.created', mine],
      ['workspace.memory.stored', mine],
    ]);
    const created = receiver.on(at)[0]!;
    expect(created.body.data).toMatchObject({ workspace_id: mine, owner_agent_id: owner.agent_id });
    expect(verifySignature(webhook.secret, created)).toBe(true);

    // The colleague's workspace once the owner administers it (from the event making it an admin on).
    await hub.ok(colleague.api_key, 'x-hub/workspace.members.add', { workspace_id: theirs, agent_id: owner.agent_id, role: 'admin' });
    await hub.ok(colleague.api_key, 'x-hub/workspace.store', { workspace_id: theirs, content: 'shared now' });
    await receiver.waitFor('the shared workspace\'s events', () => receiver.on(at).length >= 4);
    expect(events(at).slice(2)).toEqual([
      ['workspace.member.added', theirs],
      ['workspace.memory.stored', theirs],
    ]);
  });

  it('retries workspace.created as any delivery: a 500 first, then the same signed event, recorded with both attempts', async () => {
    const at = path();
    const { webhook } = await hub.ok(owner.api_key, 'x-hub/webhooks.create', { scope: 'agent', url: receiver.url(at), events: ['workspace.created'] });
    // The first request of each event here fails; its retry succeeds. (The same event also reaches
    // the earlier tests' agent-wide webhooks, under the same webhook-id: only this path counts.)
    receiver.respond((r, earlier) => (r.path === at && !earlier.some((e) => e.path === at && e.headers['webhook-id'] === r.headers['webhook-id']) ? 500 : 204));
    let ws = '';
    try {
      ws = (await hub.ok(owner.api_key, 'x-hub/workspace.create', { name: 'retried' })).workspace.id;
      await receiver.waitFor('the retry', () => receiver.on(at).some((r) => r.status === 204));
    } finally {
      receiver.respond(() => 204);
    }
    const requests = receiver.on(at);
    expect(requests.map((r) => [r.status, r.body.event, r.body.data.workspace_id])).toEqual([[500, 'workspace.created', ws], [204, 'workspace.created', ws]]);
    expect(requests[1]!.headers['webhook-id']).toBe(requests[0]!.headers['webhook-id']);
    for (const r of requests) expect(verifySignature(webhook.secret, r)).toBe(true);
    const delivered = await receiver.waitFor('the delivery recorded as delivered', async () => {
      const [d] = (await hub.ok(owner.api_key, 'x-hub/webhooks.deliveries', { scope: 'agent', webhook_id: webhook.id })).deliveries;
      return d?.status === 'delivered' && d;
    });
    expect(delivered.attempts.map((a: { status_code: number }) => a.status_code)).toEqual([500, 204]);
  });

  it('is managed without a workspace_id, only by its creator; deliveries and replay work as for any webhook', async () => {
    const at = path();
    const { webhook } = await hub.ok(owner.api_key, 'x-hub/webhooks.create', { scope: 'agent', url: receiver.url(at), events: ['workspace.created'] });
    const listed = (await hub.ok(owner.api_key, 'x-hub/webhooks.list', { scope: 'agent' })).webhooks.map((w: any) => w.id);
    expect(listed).toContain(webhook.id);
    expect((await hub.ok(colleague.api_key, 'x-hub/webhooks.list', { scope: 'agent' })).webhooks.map((w: any) => w.id)).not.toContain(webhook.id);
    expect((await hub.call(colleague.api_key, 'x-hub/webhooks.get', { scope: 'agent', webhook_id: webhook.id })).body.error).toMatchObject({ code: -32101 });
    expect((await hub.call(owner.api_key, 'x-hub/webhooks.create', { url: receiver.url(at) })).body.error).toMatchObject({ code: -32602, data: { field: 'workspace_id' } });

    const ws = (await hub.ok(owner.api_key, 'x-hub/workspace.create', { name: 'replayed' })).workspace.id;
    await hub.ok(owner.api_key, 'x-hub/workspace.store', { workspace_id: ws, content: 'filtered out' });
    const first = await receiver.waitFor('workspace.created', () => receiver.on(at)[0]);
    expect(first.body).toMatchObject({ event: 'workspace.created', data: { workspace_id: ws } });
    const { deliveries } = await hub.ok(owner.api_key, 'x-hub/webhooks.deliveries', { scope: 'agent', webhook_id: webhook.id });
    expect(deliveries).toHaveLength(1);
    const eventId = deliveries[0].event_id;
    expect((await hub.ok(owner.api_key, 'x-hub/webhooks.replay', { scope: 'agent', webhook_id: webhook.id, event_id: eventId })).replayed).toBe(1);
    const again = await receiver.waitFor('the replay', () => receiver.on(at)[1]);
    expect(again.headers['webhook-id']).toBe(first.headers['webhook-id']);
    expect(again.raw).toEqual(first.raw);
    await hub.ok(owner.api_key, 'x-hub/webhooks.delete', { scope: 'agent', webhook_id: webhook.id });
    expect((await hub.ok(owner.api_key, 'x-hub/webhooks.list', { scope: 'agent' })).webhooks.map((w: any) => w.id)).not.toContain(webhook.id);
  });
});
