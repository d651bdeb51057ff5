import { messagingv1 } from '@agenthub/proto';
import { loadConfig, Reason } from '@agenthub/runtime';
import { backends } from '@agenthub/testing';
import { messagingOptions } from '../src/options.js';
import { failure, operator, startStack, type Stack } from './harness.js';

/** A task's history and artifacts are bounded (they live in its row); the refusal names the limit. */

const { TaskState } = messagingv1;
const text = (t: string) => ({ content: { case: 'text' as const, value: { text: t } } });

describe.each(backends().map((b) => [b.name, b] as const))('task size limits (%s)', (_name, backend) => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack(backend, { replicas: 2, limits: { maxTaskItems: 3, maxTasksInFlightPerSender: 2, maxQueuedDeliveriesPerAgent: 5 } });
  });
  afterAll(() => stack?.stop());

  it('refuses a sender past its quota of tasks in flight, until one finishes', async () => {
    const sender = await stack.agent('acme', 'busy-sender');
    const other = await stack.agent('acme', 'other-sender');
    const recipient = await stack.agent('acme', 'busy-recipient');
    const [messaging] = stack.replicas;
    const send = (who: typeof sender) => messaging!.sendMessage({ recipientAgentId: recipient.id, message: { role: 'user', parts: [text('q')] } }, who.as);
    const first = (await send(sender)).task!;
    await send(sender);
    const refused = await failure(send(sender));
    expect(refused).toMatchObject({ reason: Reason.QUOTA_EXCEEDED, field: 'tasks_in_flight_per_sender' });
    expect(refused.message).toContain('at most 2 tasks');
    // Another sender has its own quota.
    await send(other);
    await messaging!.updateTask({ taskId: first.id, state: TaskState.COMPLETED }, recipient.as);
    await send(sender);
  });

  it('refuses a new task to an inbox holding its quota of deliveries (the recipient tenant’s override), until it takes one', async () => {
    const recipient = await stack.agent('qd', 'full-inbox');
    const senders = await Promise.all(['s1', 's2', 's3'].map((name) => stack.agent('qd', name)));
    await stack.identity.setTenantLimits({ tenantId: 'qd', limits: { quotas: { queued_deliveries_per_agent: 3n } } }, operator);
    const [messaging] = stack.replicas;
    const send = (who: (typeof senders)[number]) => messaging!.sendMessage({ recipientAgentId: recipient.id, message: { role: 'user', parts: [text('q')] } }, who.as);
    for (const who of senders) await send(who);
    const refused = await failure(send(senders[0]!));
    expect(refused).toMatchObject({ reason: Reason.QUOTA_EXCEEDED, field: 'queued_deliveries_per_agent' });
    expect(refused.message).toBe('Quota exceeded: the recipient has 3 deliveries waiting in its inbox; try again once it has taken some');
    // A blocking send, which subscribes before its task is written, is refused alike, and ends
    // that subscription.
    const subscribed = stack.subscriptions();
    const blocking = messaging!.sendMessage({ recipientAgentId: recipient.id, message: { role: 'user', parts: [text('q')] }, blocking: true }, senders[1]!.as);
    expect(await failure(blocking)).toMatchObject({ reason: Reason.QUOTA_EXCEEDED, field: 'queued_deliveries_per_agent' });
    for (let i = 0; i < 200 && stack.subscriptions() !== subscribed; i += 1) await new Promise((resolve) => setTimeout(resolve, 5));
    expect(stack.subscriptions()).toBe(subscribed);
    const { deliveries } = await messaging!.pollInbox({ waitMs: 0, max: 1 }, recipient.as);
    await messaging!.ackDelivery({ deliveryId: deliveries[0]!.id }, recipient.as);
    await send(senders[0]!);
    const usage = await messaging!.getAgentsUsage({ agentIds: [recipient.id, senders[0]!.id], tenantId: 'qd' }, operator);
    expect(usage.usage.map((u) => [u.quota, u.scope, u.used, u.limit])).toEqual([
      ['tasks_in_flight_per_sender', recipient.id, 0n, 2n],
      ['queued_deliveries_per_agent', recipient.id, 3n, 3n],
      ['tasks_in_flight_per_sender', senders[0]!.id, 2n, 2n],
      ['queued_deliveries_per_agent', senders[0]!.id, 0n, 3n],
    ]);
    expect(await failure(messaging!.getAgentsUsage({ agentIds: [recipient.id], tenantId: 'qd' }, recipient.as))).toMatchObject({ reason: Reason.PERMISSION_REQUIRED });
  });

  it('concurrent sends of one sender at its quota: exactly the quota is accepted, on every replica together', async () => {
    const sender = await stack.agent('acme', 'racing-sender');
    const recipient = await stack.agent('acme', 'racing-recipient');
    // Sent at once, they are written in grouped inserts on each replica: the count must hold across
    // the sends of one statement, concurrent statements and replicas alike.
    const outcomes = await Promise.all(
      Array.from({ length: 24 }, (_, i) => {
        const send = stack.replicas[i % stack.replicas.length]!.sendMessage({ recipientAgentId: recipient.id, message: { role: 'user', parts: [text(`r${i}`)] } }, sender.as);
        return send.then((r) => ({ accepted: r.task!.id }), () => failure(send));
      }),
    );
    const accepted = outcomes.filter((o) => 'accepted' in o);
    expect(accepted).toHaveLength(2);
    expect(outcomes.filter((o) => !('accepted' in o))).toEqual(Array(22).fill(expect.objectContaining({ reason: Reason.QUOTA_EXCEEDED, field: 'tasks_in_flight_per_sender' })));
    const { tasks } = await stack.replicas[0]!.listTasks({ peerAgentId: recipient.id, pageSize: 100 }, sender.as);
    expect(tasks).toHaveLength(2);
  });

  it('refuses the message or artifacts that would pass maxTaskItems, leaving the task unchanged', async () => {
    const sender = await stack.agent('acme', 'sender');
    const recipient = await stack.agent('acme', 'recipient');
    const [messaging] = stack.replicas;
    const { task } = await messaging!.sendMessage({ recipientAgentId: recipient.id, message: { role: 'user', parts: [text('q1')] } }, sender.as);
    await messaging!.updateTask({ taskId: task!.id, state: TaskState.INPUT_REQUIRED, message: { role: 'agent', parts: [text('which?')] } }, recipient.as);
    await messaging!.sendMessage({ taskId: task!.id, message: { role: 'user', parts: [text('that one')] } }, sender.as);

    const tooMany = await failure(
      messaging!.updateTask({ taskId: task!.id, state: TaskState.INPUT_REQUIRED, message: { role: 'agent', parts: [text('and?')] } }, recipient.as),
    );
    expect(tooMany.reason).toBe(Reason.LIMIT_EXCEEDED);
    expect(tooMany.message).toContain('maximum of 3 messages');

    const artifacts = Array.from({ length: 4 }, (_, i) => ({ name: `a${i}`, parts: [text(`${i}`)] }));
    const tooBig = await failure(messaging!.updateTask({ taskId: task!.id, state: TaskState.COMPLETED, artifacts }, recipient.as));
    expect(tooBig.reason).toBe(Reason.LIMIT_EXCEEDED);

    const unchanged = (await messaging!.getTask({ taskId: task!.id }, sender.as)).task!;
    expect([unchanged.state, unchanged.messages.length, unchanged.artifacts.length]).toEqual([TaskState.SUBMITTED, 3, 0]);
    const done = await messaging!.updateTask({ taskId: task!.id, state: TaskState.COMPLETED, artifacts: artifacts.slice(0, 3) }, recipient.as);
    expect(done.task!.artifacts).toHaveLength(3);
  });
});

/**
 * Issue 12 item 6: a task is bounded by bytes too, checked before commit, so a continuation past
 * the bound commits nothing and is refused naming the limit; GetTask and ListTasks keep working.
 */
describe.each(backends().map((b) => [b.name, b] as const))('task byte limit (%s)', (_name, backend) => {
  const maxTaskBytes = 4000;
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack(backend, { limits: { maxTaskBytes } });
  });
  afterAll(() => stack?.stop());

  const queued = async (taskId: string) =>
    Number((await stack.db.query<{ n: string | number }>('SELECT count(*) AS n FROM deliveries WHERE task_id = $1', [taskId])).rows[0]!.n);

  it('refuses a continuation that would pass maxTaskBytes before committing anything, naming the limit', async () => {
    const sender = await stack.agent('acme', 'sender');
    const recipient = await stack.agent('acme', 'recipient');
    const [messaging] = stack.replicas;
    const { task } = await messaging!.sendMessage({ recipientAgentId: recipient.id, message: { role: 'user', parts: [text('x'.repeat(1500))] } }, sender.as);
    await messaging!.updateTask({ taskId: task!.id, state: TaskState.INPUT_REQUIRED, message: { role: 'agent', parts: [text('more?')] } }, recipient.as);
    await messaging!.sendMessage({ taskId: task!.id, message: { role: 'user', parts: [text('y'.repeat(1500))] } }, sender.as);
    await messaging!.updateTask({ taskId: task!.id, state: TaskState.INPUT_REQUIRED, message: { role: 'agent', parts: [text('and?')] } }, recipient.as);
    const before = await queued(task!.id);

    const refused = await failure(messaging!.sendMessage({ taskId: task!.id, message: { role: 'user', parts: [text('z'.repeat(1500))] } }, sender.as));
    expect(refused.reason).toBe(Reason.LIMIT_EXCEEDED);
    expect(refused.message).toContain(`maximum of ${maxTaskBytes} bytes`);
    expect(refused.message).toContain('MESSAGING_TASK_MAX_BYTES');

    const unchanged = (await messaging!.getTask({ taskId: task!.id }, sender.as)).task!;
    expect([unchanged.state, unchanged.messages.length, Number(unchanged.version)]).toEqual([TaskState.INPUT_REQUIRED, 4, 4]);
    expect(await queued(task!.id)).toBe(before);

    const artifacts = [{ name: 'big', parts: [text('a'.repeat(2000))] }];
    const tooBig = await failure(messaging!.updateTask({ taskId: task!.id, state: TaskState.COMPLETED, artifacts }, recipient.as));
    expect(tooBig.reason).toBe(Reason.LIMIT_EXCEEDED);
    expect((await messaging!.getTask({ taskId: task!.id }, sender.as)).task!.state).toBe(TaskState.INPUT_REQUIRED);

    // A small answer still fits; the task reads back whole.
    const done = await messaging!.updateTask({ taskId: task!.id, state: TaskState.COMPLETED, artifacts: [{ name: 'ok', parts: [text('fits')] }] }, recipient.as);
    expect([done.task!.state, done.task!.messages.length, done.task!.artifacts.length]).toEqual([TaskState.COMPLETED, 4, 1]);
  });

  it('pages ListTasks so that one answer never carries more than maxTaskBytes of history; every task is listed once', async () => {
    const sender = await stack.agent('acme', 'lister');
    const recipient = await stack.agent('acme', 'listed');
    const [messaging] = stack.replicas;
    const ids: string[] = [];
    for (let i = 0; i < 5; i += 1) {
      const { task } = await messaging!.sendMessage({ recipientAgentId: recipient.id, message: { role: 'user', parts: [text(`${i}`.repeat(1800))] } }, sender.as);
      ids.push(task!.id);
    }
    const seen: string[] = [];
    let pageToken = '';
    do {
      const page = await messaging!.listTasks({ pageSize: 50, pageToken }, sender.as);
      expect(page.totalSize).toBe(5);
      expect(page.tasks.length).toBeLessThanOrEqual(2);
      for (const t of page.tasks) {
        expect(t.messages).toHaveLength(1);
        seen.push(t.id);
      }
      pageToken = page.nextPageToken;
    } while (pageToken);
    expect(seen.sort()).toEqual([...ids].sort());
    // Without history the stored size does not matter: one page holds them all.
    const bare = await messaging!.listTasks({ pageSize: 50, historyLength: 0 }, sender.as);
    expect([bare.tasks.length, bare.nextPageToken]).toEqual([5, '']);
  });
});

describe('HUB_QUOTA_QUEUED_DELIVERIES_PER_AGENT', () => {
  it('is 10000 by default; 0 turns the quota off, as for tasks in flight', () => {
    expect(messagingOptions(loadConfig({})).limits?.maxQueuedDeliveriesPerAgent).toBe(10_000);
    expect(messagingOptions(loadConfig({ HUB_QUOTA_QUEUED_DELIVERIES_PER_AGENT: '0' })).limits?.maxQueuedDeliveriesPerAgent).toBe(Infinity);
    expect(messagingOptions(loadConfig({ HUB_QUOTA_TASKS_IN_FLIGHT_PER_SENDER: '0' })).limits?.maxTasksInFlightPerSender).toBe(Infinity);
  });
});
