import { messagingv1 } from '@agenthub/proto';
import type { Db } from '@agenthub/runtime';
import { backends } from '@agenthub/testing';
import { startEchoAgent, type EchoAgent } from './echo-agent.js';
import type { TestAgent } from './harness.js';
import { startPushStack, type PushStack } from './push-stack.js';

/**
 * A blocking send answers with the task as the update that settled it wrote it (an agent's
 * UpdateTask, or the push worker relaying an agent's answer, on the same replica), and it
 * subscribed to the task's transitions before writing the task: nothing on its way reads the
 * task back. One replica, so the update is made where the send waits.
 */

const { TaskState } = messagingv1;
const text = (t: string) => ({ content: { case: 'text' as const, value: { text: t } } });
/** getTask's statement: the task by id, unlocked (a transition reads it with its items' ids, or FOR UPDATE). */
const TASK_READ = /^SELECT [\w, ]+ FROM tasks WHERE id = \$1$/;

describe.each(backends().map((b) => [b.name, b] as const))('a blocking send does not read its task back (%s)', (_name, backend) => {
  let stack: PushStack;
  let sender: TestAgent;
  let agent: EchoAgent | undefined;
  /** The id of each task getTask read, in order. */
  const reads: string[] = [];
  const readsOf = (taskId: string) => reads.filter((id) => id === taskId).length;

  beforeAll(async () => {
    const observe = (db: Db) =>
      new Proxy(db, {
        get(target, key, receiver) {
          if (key === 'query') {
            return (...args: Parameters<Db['query']>) => {
              const [text, params] = args;
              if (TASK_READ.test(text)) reads.push(String(params?.[0]));
              return target.query(...args);
            };
          }
          const value = Reflect.get(target, key, receiver);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
    stack = await startPushStack(backend, undefined, {}, { replicas: 1, observe });
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
});
