import { messagingv1 } from '@agenthub/proto';
import { Reason } from '@agenthub/runtime';
import { backends, testLogger } from '@agenthub/testing';
import { sweepExpired } from '../src/index.js';
import { failure, startStack, type Stack, type TestAgent } from './harness.js';

/**
 * The messaging service over gRPC with a hand-moved clock: x-ttl expiry by the sweeper,
 * redelivery of unacknowledged deliveries under the same id, SKIP LOCKED claims shared by two
 * replicas, blocking sends completed on another replica, and the outbox.
 */

const { TaskState } = messagingv1;
const text = (t: string) => ({ content: { case: 'text' as const, value: { text: t } } });
const quiet = testLogger();
const message = (t: string) => ({ role: 'user', parts: [text(t)] });

describe.each(backends().map((b) => [b.name, b] as const))('messaging service (%s)', (_name, backend) => {
  let stack: Stack;
  let sender: TestAgent;

  beforeAll(async () => {
    stack = await startStack(backend, { replicas: 2, limits: { blockingMs: 10_000 }, restartable: true });
    sender = await stack.agent('acme', 'sender');
  });
  afterAll(() => stack?.stop());

  const [a, b] = [() => stack.replicas[0]!, () => stack.replicas[1]!];

  it('x-ttl expiry: the sweeper fails a still-submitted task once its clock passes the ttl', async () => {
    const offline = await stack.agent('acme', 'offline');
    const { task } = await a().sendMessage({ recipientAgentId: offline.id, message: message('hi'), ttlSeconds: 3600n }, sender.as);
    expect(task?.state).toBe(TaskState.SUBMITTED);

    stack.clock.advance(3599_000);
    expect(await sweepExpired(stack.env, quiet)).toBe(0);
    expect((await a().getTask({ taskId: task!.id }, sender.as)).task?.state).toBe(TaskState.SUBMITTED);

    stack.clock.advance(2_000);
    expect(await sweepExpired(stack.env, quiet)).toBe(1);
    const failed = (await b().getTask({ taskId: task!.id }, sender.as)).task!;
    expect(failed.state).toBe(TaskState.FAILED);
    expect(Number(failed.updatedAt)).toBe(stack.clock.ms);
    expect((await a().pollInbox({ waitMs: 0 }, offline.as)).deliveries).toEqual([]);

    const { rows } = await stack.db.query<{ type: string; payload: any }>(
      "SELECT type, payload FROM outbox WHERE partition_key = $1 ORDER BY seq",
      [task!.id],
    );
    expect(rows.map((r) => [r.type, (typeof r.payload === 'string' ? JSON.parse(r.payload) : r.payload).data.state])).toEqual([
      ['messaging.task.created', 'submitted'],
      ['messaging.task.transitioned', 'failed'],
    ]);
  });

  it('x-ttl expiry is announced like every transition: a blocking send on another replica answers at once', async () => {
    const offline = await stack.agent('acme', 'offline-blocking');
    const sending = b().sendMessage({ recipientAgentId: offline.id, message: message('waiting'), ttlSeconds: 60n, blocking: true }, sender.as);
    const deadline = Date.now() + 10_000;
    let rows: { id: string }[] = [];
    while (!rows.length && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      ({ rows } = await stack.db.query<{ id: string }>('SELECT id FROM tasks WHERE recipient_agent_id = $1', [offline.id]));
    }
    expect(rows).toHaveLength(1);
    stack.clock.advance(61_000);
    const swept = Date.now();
    expect(await sweepExpired(stack.env, quiet)).toBe(1);
    const { task } = await sending;
    expect([task!.id, task!.state]).toEqual([rows[0]!.id, TaskState.FAILED]);
    // Unannounced, the send would answer only when its 10 s wait ran out.
    expect(Date.now() - swept).toBeLessThan(5_000);
  });

  it('an unacknowledged delivery comes back with the same id after the claim window', async () => {
    const recipient = await stack.agent('acme', 'forgetful');
    const { task } = await a().sendMessage({ recipientAgentId: recipient.id, message: message('again') }, sender.as);
    const first = (await a().pollInbox({ waitMs: 0 }, recipient.as)).deliveries;
    expect(first.map((d) => [d.taskId, d.attempt])).toEqual([[task!.id, 1]]);
    expect((await b().pollInbox({ waitMs: 0 }, recipient.as)).deliveries).toEqual([]);
    stack.clock.advance(31_000);
    const second = (await b().pollInbox({ waitMs: 0 }, recipient.as)).deliveries;
    expect(second.map((d) => [d.id, d.attempt])).toEqual([[first[0]!.id, 2]]);
    expect((await b().ackDelivery({ deliveryId: first[0]!.id }, recipient.as)).acked).toBe(true);
    stack.clock.advance(31_000);
    expect((await a().pollInbox({ waitMs: 0 }, recipient.as)).deliveries).toEqual([]);
  });

  it('finishing a task removes its queued deliveries: no ack needed, nothing handed out again', async () => {
    const recipient = await stack.agent('acme', 'finisher');
    const { task } = await a().sendMessage({ recipientAgentId: recipient.id, message: message('once') }, sender.as);
    const [delivery] = (await a().pollInbox({ waitMs: 0 }, recipient.as)).deliveries;
    expect(delivery?.taskId).toBe(task!.id);
    await b().updateTask({ taskId: task!.id, state: TaskState.COMPLETED }, recipient.as);
    stack.clock.advance(31_000);
    expect((await a().pollInbox({ waitMs: 0 }, recipient.as)).deliveries).toEqual([]);
    expect((await a().ackDelivery({ deliveryId: delivery!.id }, recipient.as)).acked).toBe(false);
  });

  it('two replicas polling one queue at once share it without handing a delivery out twice', async () => {
    const recipient = await stack.agent('acme', 'busy');
    const sent = [];
    for (let i = 0; i < 20; i += 1) sent.push((await a().sendMessage({ recipientAgentId: recipient.id, message: message(`m${i}`) }, sender.as)).task!.id);
    const polls = await Promise.all([0, 1, 2, 3].map((i) => stack.replicas[i % 2]!.pollInbox({ waitMs: 0, max: 5 }, recipient.as)));
    const ids = polls.flatMap((p) => p.deliveries.map((d) => d.taskId));
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.sort()).toEqual([...sent].sort());
  });

  it('a long-poll on one replica wakes for a send on the other', async () => {
    const recipient = await stack.agent('acme', 'waiting');
    const started = Date.now();
    const listening = stack.listening(recipient.id);
    const polling = a().pollInbox({ waitMs: 10_000 }, recipient.as);
    // The poll found nothing and listens for its inbox's wake-up: the send below reaches it only so.
    await listening;
    const { task } = await b().sendMessage({ recipientAgentId: recipient.id, message: message('wake') }, sender.as);
    const { deliveries } = await polling;
    expect(deliveries.map((d) => d.taskId)).toEqual([task!.id]);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('a blocking send on one replica returns when the task completes on the other', async () => {
    const recipient = await stack.agent('acme', 'worker');
    const sending = a().sendMessage({ recipientAgentId: recipient.id, message: message('work'), blocking: true }, sender.as);
    let delivery;
    for (let i = 0; i < 50 && !delivery; i += 1) delivery = (await b().pollInbox({ waitMs: 500 }, recipient.as)).deliveries[0];
    await b().updateTask({ taskId: delivery!.taskId, state: TaskState.INPUT_REQUIRED, message: { role: 'agent', parts: [text('more?')] } }, recipient.as);
    const { task } = await sending;
    expect(task?.state).toBe(TaskState.INPUT_REQUIRED);
    expect(task?.messages.map((m) => m.role)).toEqual(['user', 'agent']);
  });

  it('queued deliveries survive a restart: nothing lost, a redelivery keeps its id', async () => {
    const recipient = await stack.agent('acme', 'restarted');
    const one = (await a().sendMessage({ recipientAgentId: recipient.id, message: message('one') }, sender.as)).task!;
    const two = (await a().sendMessage({ recipientAgentId: recipient.id, message: message('two') }, sender.as)).task!;
    const claimed = (await a().pollInbox({ waitMs: 0, max: 1 }, recipient.as)).deliveries;
    expect(claimed.map((d) => d.taskId)).toEqual([one.id]);
    await stack.restart();
    stack.clock.advance(31_000);
    const after = (await a().pollInbox({ waitMs: 0 }, recipient.as)).deliveries;
    expect(after.map((d) => [d.taskId, d.attempt])).toEqual([[one.id, 2], [two.id, 1]]);
    expect(after[0]!.id).toBe(claimed[0]!.id);
    expect((await b().getTask({ taskId: two.id }, recipient.as)).task?.state).toBe(TaskState.SUBMITTED);
  });

  it('only the recipient updates; states outside the recipient\'s set are refused', async () => {
    const recipient = await stack.agent('acme', 'strict');
    const { task } = await a().sendMessage({ recipientAgentId: recipient.id, message: message('x') }, sender.as);
    expect((await failure(a().updateTask({ taskId: task!.id, state: TaskState.COMPLETED }, sender.as))).reason).toBe(Reason.ACCESS_DENIED);
    expect((await failure(a().updateTask({ taskId: task!.id, state: TaskState.CANCELED }, recipient.as))).field).toBe('state');
  });
});
