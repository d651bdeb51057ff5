import { messagingv1 } from '@agenthub/proto';
import type { Db, Kv } from '@agenthub/runtime';
import { backends } from '@agenthub/testing';
import { startEchoAgent, type EchoAgent } from './echo-agent.js';
import type { TestAgent } from './harness.js';
import { eventually, startPushStack, type PushStack } from './push-stack.js';

/**
 * A blocking send answers with the task as the update that settled it wrote it (an agent's
 * UpdateTask, or the push worker relaying an agent's answer, on the same replica), and it
 * subscribed to the task's transitions before writing the task: nothing on its way reads the
 * task back. A send that fails before its task is written leaves no subscription behind. One
 * replica, so the update is made where the send waits.
 */

const { TaskState } = messagingv1;
const text = (t: string) => ({ content: { case: 'text' as const, value: { text: t } } });
/** getTask's statement: the task by id, unlocked (a transition reads it with its items' ids, or FOR UPDATE). */
const TASK_READ = /^SELECT [\w, ]+ FROM tasks WHERE id = \$1$/;

describe.each(backends().map((b) => [b.name, b] as const))('a blocking send (%s)', (_name, backend) => {
  let stack: PushStack;
  let sender: TestAgent;
  let agent: EchoAgent | undefined;
  /** The id of each task getTask read, in order. */
  const reads: string[] = [];
  const readsOf = (taskId: string) => reads.filter((id) => id === taskId).length;
  /** Statements that fail, once each, when their text matches. */
  const failing: RegExp[] = [];
  /** Task channels the replica is subscribed to now. */
  const taskSubscriptions = new Set<string>();

  beforeAll(async () => {
    const observe = (db: Db) =>
      new Proxy(db, {
        get(target, key, receiver) {
          if (key === 'query') {
            return (...args: Parameters<Db['query']>) => {
              const [text, params] = args;
              if (TASK_READ.test(text)) reads.push(String(params?.[0]));
              const fails = failing.findIndex((pattern) => pattern.test(text));
              if (fails >= 0) {
                failing.splice(fails, 1);
                return Promise.reject(new Error('the database went away (test)'));
              }
              return target.query(...args);
            };
          }
          const value = Reflect.get(target, key, receiver);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
    const observeKv = (kv: Kv) =>
      new Proxy(kv, {
        get(target, key, receiver) {
          if (key === 'subscribe') {
            return async (channel: string, ...rest: [(message: string) => void, (() => void)?]) => {
              const unsubscribe = await target.subscribe(channel, ...rest);
              if (!channel.includes(':task:')) return unsubscribe;
              taskSubscriptions.add(channel);
              return async () => {
                taskSubscriptions.delete(channel);
                await unsubscribe();
              };
            };
          }
          const value = Reflect.get(target, key, receiver);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
    stack = await startPushStack(backend, undefined, {}, { replicas: 1, observe, observeKv });
    sender = await stack.agent('sender');
  });
  afterAll(async () => {
    await agent?.stop();
    await stack?.stop();
  });

  it('to a push agent: the task comes back completed with the agent\'s answer, and was never read', async () => {
    // Answering with a message, the agent finishes at its first answer: no follow-up (which reads the task for itself).
    agent = await startEchoAgent('message');
    const recipient = await stack.agent('talker', agent.url);
    const { task } = await stack.replicas[0]!.sendMessage({ recipientAgentId: recipient.id, message: { role: 'user', parts: [text('hello')] }, blocking: true }, sender.as);

    expect(task?.state).toBe(TaskState.COMPLETED);
    expect(task!.messages.map((m) => m.parts.map((p) => (p.content.case === 'text' ? p.content.value.text : p.content.case)).join())).toEqual(['hello', 'Hello from a message']);
    // Before: read once after subscribing (in case it settled first) and once more to answer.
    expect(readsOf(task!.id)).toBe(0);
  });

  it('to a connected agent: the answer is the agent\'s update, and only the update itself looked at the task', async () => {
    const recipient = await stack.agent('connected');
    const sending = stack.replicas[0]!.sendMessage({ recipientAgentId: recipient.id, message: { role: 'user', parts: [text('work')] }, blocking: true }, sender.as);
    let delivery: messagingv1.Delivery | undefined;
    for (let i = 0; i < 50 && !delivery; i += 1) delivery = (await stack.replicas[0]!.pollInbox({ waitMs: 500 }, recipient.as)).deliveries[0];
    await stack.replicas[0]!.updateTask({ taskId: delivery!.taskId, state: TaskState.COMPLETED, message: { role: 'agent', parts: [text('done')] } }, recipient.as);
    const { task } = await sending;

    expect(task?.state).toBe(TaskState.COMPLETED);
    expect(task!.messages.map((m) => m.role)).toEqual(['user', 'agent']);
    // UpdateTask reads the task to check it is the recipient's; before, the send read it once more.
    expect(readsOf(task!.id)).toBe(1);
  });

  it('that fails before its task is written leaves no subscription open, and no task', async () => {
    const echoing = await startEchoAgent('message');
    try {
      const recipient = await stack.agent('unrecorded', echoing.url);
      failing.push(/INSERT INTO push_agents/);
      await expect(
        stack.replicas[0]!.sendMessage({ recipientAgentId: recipient.id, message: { role: 'user', parts: [text('lost')] }, blocking: true }, sender.as),
      ).rejects.toThrow();
      expect([...taskSubscriptions]).toEqual([]);
      expect((await stack.db.query('SELECT id FROM tasks WHERE recipient_agent_id = $1', [recipient.id])).rows).toEqual([]);
      // The next send to the agent goes through, and its subscription goes with its answer.
      const { task } = await stack.replicas[0]!.sendMessage({ recipientAgentId: recipient.id, message: { role: 'user', parts: [text('again')] }, blocking: true }, sender.as);
      expect(task?.state).toBe(TaskState.COMPLETED);
      await eventually(async () => taskSubscriptions.size === 0, 'the answered send to unsubscribe');
    } finally {
      await echoing.stop();
    }
  });
});
