import { messagingv1 } from '@agenthub/proto';
import { loadConfig } from '@agenthub/runtime';
import { backends } from '@agenthub/testing';
import { messagingOptions } from '../src/index.js';
import { reservePort, startEchoAgent, type EchoAgent } from './echo-agent.js';
import { eventually, startPushStack, startTarpit, type PushStack } from './push-stack.js';

/**
 * The push worker's slots (issue 13, issue 16 item 4): several calls to one agent at once, up to
 * MESSAGING_PUSH_CONCURRENCY_PER_AGENT; a task's messages one at a time, in order; and the agents
 * of one tenant holding at most their tenant's share, so a tarpit agent of one tenant does not
 * delay another tenant's deliveries.
 *
 * Each replica here has 4 slots, 2 per tenant and 2 per agent; a call times out after 10 s, so a
 * delivery that waited for a tarpit's slot would take that long.
 */

const { TaskState } = messagingv1;
const text = (t: string) => ({ content: { case: 'text' as const, value: { text: t } } });
const message = (t: string) => ({ role: 'user', parts: [text(t)] });
const words = (received: EchoAgent['received']) => received.map((r) => r.parts.map((p) => p.content?.value).join());

it('MESSAGING_PUSH_CONCURRENCY and MESSAGING_PUSH_CONCURRENCY_PER_AGENT set the push workers\' slots', () => {
  expect(messagingOptions(loadConfig({})).push).toMatchObject({ concurrency: 64, perAgent: 8 });
  const { push } = messagingOptions(loadConfig({ MESSAGING_PUSH_CONCURRENCY: '8', MESSAGING_PUSH_CONCURRENCY_PER_AGENT: '1' }));
  expect(push).toMatchObject({ concurrency: 8, perAgent: 1 });
});

describe.each(backends().map((b) => [b.name, b] as const))('push delivery slots (%s)', (_name, backend) => {
  let stack: PushStack;
  const closing: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    stack = await startPushStack(backend, { allowPrivate: true }, { concurrency: 4, perTenant: 2, perAgent: 2, timeoutMs: 10_000 });
  });
  afterAll(async () => {
    await stack?.stop();
    for (const close of closing) await close();
  });

  const state = async (taskId: string, as: Parameters<PushStack['replicas'][0]['getTask']>[1]) =>
    (await stack.replicas[0]!.getTask({ taskId }, as)).task!;

  it('one agent gets several messages at once, never more than MESSAGING_PUSH_CONCURRENCY_PER_AGENT', async () => {
    const sender = await stack.agent('busy-sender', '', 'busy');
    const port = await reservePort();
    const agent = await stack.agent('busy-agent', `http://127.0.0.1:${port}/a2a`, 'busy');
    const sent: messagingv1.Task[] = [];
    for (let i = 0; i < 5; i += 1) sent.push((await stack.replicas[i % 2]!.sendMessage({ recipientAgentId: agent.id, message: message(`m${i}`) }, sender.as)).task!);
    // Queued while the agent is down, so the whole queue is there when it comes back.
    await eventually(async () => {
      const { rows } = await stack.db.query<{ attempts: number }>('SELECT attempts FROM deliveries WHERE task_id = $1', [sent[0]!.id]);
      return (rows[0]?.attempts ?? 0) >= 1;
    }, 'an attempt');

    // Its first two requests are answered only once both have arrived: one at a time, each would
    // wait out the hub's 10 s deadline and the tasks below would not complete in time. Should the
    // agent come up between two calls the hub made at once (the first refused, the second held
    // alone), the next two open the gate once the hub gave up on the held one: 20 s allows that.
    const remote = await startEchoAgent('echo', { port, gate: 2 });
    closing.push(() => remote.stop());
    for (const task of sent) await eventually(async () => (await state(task.id, sender.as)).state === TaskState.COMPLETED, `task ${task.id} to complete`, 20_000);
    expect(words(remote.received).sort()).toEqual(['m0', 'm1', 'm2', 'm3', 'm4']);
    // Two replicas, each at most two calls to the agent.
    expect(remote.load.max).toBeGreaterThanOrEqual(2);
    expect(remote.load.max).toBeLessThanOrEqual(4);
  });

  it("a task's messages reach the agent one at a time, in order, the later one continuing the agent's task", async () => {
    const sender = await stack.agent('patient-sender', '', 'patient');
    const port = await reservePort();
    const agent = await stack.agent('patient-agent', `http://127.0.0.1:${port}/a2a`, 'patient');
    const first = (await stack.replicas[0]!.sendMessage({ recipientAgentId: agent.id, message: message('first') }, sender.as)).task!;
    // A continuation while the task is still submitted: both deliveries are queued together.
    await stack.replicas[1]!.sendMessage({ taskId: first.id, message: message('second') }, sender.as);
    const remote = await startEchoAgent('slow', { port });
    closing.push(() => remote.stop());
    await eventually(async () => remote.received.length === 2, 'both messages');
    // The slow agent works until canceled.
    await stack.replicas[0]!.cancelTask({ taskId: first.id }, sender.as);
    expect(words(remote.received)).toEqual(['first', 'second']);
    expect(remote.received[1]!.taskId).toBe(remote.received[0]!.agentTaskId);
  });

  it("tarpit agents of one tenant hold at most its tenant's slots: another tenant's messages arrive promptly", async () => {
    // Four tarpit agents, two calls each, could take all 8 slots of the two replicas.
    const tarpits = await Promise.all([0, 1, 2, 3].map(() => startTarpit()));
    for (const tarpit of tarpits) closing.push(() => tarpit.close());
    const stuck = () => tarpits.reduce((sum, t) => sum + t.load.now, 0);
    const noisy = await stack.agent('noisy-sender', '', 'noisy');
    for (const [i, tarpit] of tarpits.entries()) {
      const agent = await stack.agent(`tarpit-${i}`, tarpit.url, 'noisy');
      for (let n = 0; n < 2; n += 1) await stack.replicas[n % 2]!.sendMessage({ recipientAgentId: agent.id, message: message(`stuck ${n}`) }, noisy.as);
    }
    // The noisy tenant's share: 2 calls on each replica.
    await eventually(async () => stuck() === 4, 'the tarpits to hold their share');

    const quiet = await stack.agent('quiet-sender', '', 'quiet');
    const remote = await startEchoAgent('echo');
    closing.push(() => remote.stop());
    const agent = await stack.agent('quick', remote.url, 'quiet');
    const started = performance.now();
    for (let n = 0; n < 3; n += 1) {
      const { task } = await stack.replicas[n % 2]!.sendMessage({ recipientAgentId: agent.id, message: message(`quick ${n}`), blocking: true }, quiet.as);
      expect(task?.state).toBe(TaskState.COMPLETED);
    }
    // Well inside the 10 s a delivery waiting for a tarpit's slot would take.
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(words(remote.received).sort()).toEqual(['quick 0', 'quick 1', 'quick 2']);
    expect(stuck()).toBe(4);
  });
});
