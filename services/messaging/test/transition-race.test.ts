import { messagingv1 } from '@agenthub/proto';
import { HubError, Reason, type Db } from '@agenthub/runtime';
import { backends } from '@agenthub/testing';
import type { HeldIds } from '../src/task-items.js';
import { TaskStore } from '../src/task-store.js';
import { failure, startStack, type Stack } from './harness.js';

/**
 * An update is written in one statement on the condition that the task is still at the version it
 * read (store.ts transitionFrom); one that lost a race is decided again under the task's lock.
 */

const { TaskState } = messagingv1;
const text = (t: string) => ({ content: { case: 'text' as const, value: { text: t } } });

/**
 * `db` counting its statements and transactions; `beforeWrite` runs once, just before the first
 * version-checked write (transitionFrom's statement) reaches the database.
 */
function counting(db: Db, beforeWrite?: () => Promise<void>): { db: Db; counts: { query: number; transaction: number } } {
  const counts = { query: 0, transaction: 0 };
  let pending = beforeWrite;
  const proxy = new Proxy(db, {
    get(target, prop) {
      if (prop === 'query') {
        return async (text: string, params?: unknown[], signal?: AbortSignal) => {
          counts.query += 1;
          if (pending && text.trimStart().startsWith('WITH upd AS')) {
            const run = pending;
            pending = undefined;
            await run();
          }
          return target.query(text, params, signal);
        };
      }
      if (prop === 'transaction') {
        return (work: Parameters<Db['transaction']>[0], signal?: AbortSignal) => {
          counts.transaction += 1;
          return target.transaction(work, signal);
        };
      }
      const value = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { db: proxy, counts };
}

const artifact = (id: string) => ({ id, name: id, parts: [] });

describe.each(backends().map((b) => [b.name, b] as const))('concurrent transitions of one task (%s)', (_name, backend) => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack(backend, { replicas: 2 });
  });
  afterAll(() => stack?.stop());

  it('racing updates: exactly one finishes the task, the others are refused, and the task holds its items once', async () => {
    const sender = await stack.agent('acme', 'race-sender');
    const recipient = await stack.agent('acme', 'race-recipient');
    const [one, two] = stack.replicas;
    const { task } = await one!.sendMessage({ recipientAgentId: recipient.id, message: { role: 'user', parts: [text('q')] } }, sender.as);
    const outcomes = await Promise.all(
      Array.from({ length: 6 }, (_, i) => {
        const update = (i % 2 ? two : one)!.updateTask(
          { taskId: task!.id, state: TaskState.COMPLETED, artifacts: [{ name: `a${i}`, parts: [text(`answer ${i}`)] }] },
          recipient.as,
        );
        return update.then((r) => ({ finished: r.task! }), () => failure(update));
      }),
    );
    const finished = outcomes.flatMap((o) => ('finished' in o ? [o.finished] : []));
    expect(finished).toHaveLength(1);
    expect(outcomes.filter((o) => !('finished' in o))).toEqual(Array(5).fill(expect.objectContaining({ reason: Reason.INVALID_OPERATION })));
    const stored = (await two!.getTask({ taskId: task!.id }, sender.as)).task!;
    expect(stored.state).toBe(TaskState.COMPLETED);
    expect(stored.version).toBe(2n);
    expect(stored.artifacts.map((a) => a.name)).toEqual([finished[0]!.artifacts[0]!.name]);
    expect(stored.messages).toHaveLength(1);
  });

  it('a change decided on a task that moved on meanwhile writes nothing, and is decided again on the task as it is', async () => {
    const sender = await stack.agent('acme', 'stale-sender');
    const recipient = await stack.agent('acme', 'stale-recipient');
    const [one] = stack.replicas;
    const { task } = await one!.sendMessage({ recipientAgentId: recipient.id, message: { role: 'user', parts: [text('q')] } }, sender.as);
    const stale = (await stack.env.tasks.getTask(new AbortController().signal, task!.id, false))!;
    await one!.updateTask({ taskId: task!.id, state: TaskState.COMPLETED, artifacts: [{ name: 'first', parts: [text('1')] }] }, recipient.as);
    const seen: string[] = [];
    const late = stack.env.tasks.transition(
      new AbortController().signal,
      task!.id,
      (t) => {
        seen.push(t.state);
        if (t.state !== 'submitted') throw HubError.invalidOperation(`Task is ${t.state}`);
        return { next: { state: 'completed', updatedAt: Date.now() }, append: { artifacts: [{ artifactId: 'second', name: 'second', parts: [] }] } };
      },
      { current: stale },
    );
    expect(await failure(late)).toMatchObject({ reason: Reason.INVALID_OPERATION });
    expect(seen).toEqual(['submitted', 'completed']);
    const stored = (await one!.getTask({ taskId: task!.id }, sender.as)).task!;
    expect([stored.version, stored.artifacts.map((a) => a.name)]).toEqual([2n, ['first']]);
  });

  it('an update answers with the task as it committed: earlier messages, then the ones it added', async () => {
    const sender = await stack.agent('acme', 'history-sender');
    const recipient = await stack.agent('acme', 'history-recipient');
    const [one] = stack.replicas;
    const { task } = await one!.sendMessage({ recipientAgentId: recipient.id, message: { role: 'user', parts: [text('q1')] } }, sender.as);
    await one!.updateTask({ taskId: task!.id, state: TaskState.INPUT_REQUIRED, message: { role: 'agent', parts: [text('which?')] } }, recipient.as);
    await one!.sendMessage({ taskId: task!.id, message: { role: 'user', parts: [text('that one')] } }, sender.as);
    const { task: done } = await one!.updateTask(
      { taskId: task!.id, state: TaskState.COMPLETED, message: { role: 'agent', parts: [text('done')] }, artifacts: [{ name: 'result', parts: [text('r')] }] },
      recipient.as,
    );
    const words = (m: messagingv1.Message) => (m.parts[0]?.content.case === 'text' ? m.parts[0].content.value.text : '');
    expect(done!.messages.map(words)).toEqual(['q1', 'which?', 'that one', 'done']);
    expect(done!.artifacts.map((a) => a.name)).toEqual(['result']);
    expect(done!.version).toBe(4n);
    const stored = (await one!.getTask({ taskId: task!.id }, sender.as)).task!;
    expect(stored.messages.map(words)).toEqual(['q1', 'which?', 'that one', 'done']);
  });

  it('a change that needs the ids the task holds (a push agent\'s answer) is one read and one write, no transaction', async () => {
    const sender = await stack.agent('acme', 'held-sender');
    const recipient = await stack.agent('acme', 'held-recipient');
    const { task } = await stack.replicas[0]!.sendMessage({ recipientAgentId: recipient.id, message: { role: 'user', parts: [text('q')] } }, sender.as);
    await stack.env.tasks.transition(new AbortController().signal, task!.id, () => ({ next: { state: 'working', updatedAt: Date.now() }, append: { artifacts: [artifact('first')] } }));
    const { db, counts } = counting(stack.db);
    const seen: HeldIds[] = [];
    const moved = await new TaskStore(db, 60_000).transition(
      new AbortController().signal,
      task!.id,
      (_t, held) => {
        seen.push(held!);
        return { next: { state: 'completed', updatedAt: Date.now() }, append: { artifacts: [artifact('first'), artifact('second')].filter((a) => !held!.artifacts.has(a.id)) } };
      },
      { held: true, load: { artifacts: true } },
    );
    expect(counts).toEqual({ query: 2, transaction: 0 });
    expect(seen.map((held) => [...held.artifacts])).toEqual([['first']]);
    expect(moved!.after.state).toBe('completed');
    const stored = (await stack.replicas[0]!.getTask({ taskId: task!.id }, sender.as)).task!;
    expect([stored.version, stored.artifacts.map((a) => a.name)]).toEqual([3n, ['first', 'second']]);
  });

  it('one whose task moved between that read and its write writes nothing, and is decided again under the lock with the ids held then', async () => {
    const sender = await stack.agent('acme', 'held-race-sender');
    const recipient = await stack.agent('acme', 'held-race-recipient');
    const { task } = await stack.replicas[0]!.sendMessage({ recipientAgentId: recipient.id, message: { role: 'user', parts: [text('q')] } }, sender.as);
    // Another replica relays the same answer in between: its artifact lands first.
    const { db, counts } = counting(stack.db, async () => {
      await stack.env.tasks.transition(new AbortController().signal, task!.id, () => ({ next: { state: 'working', updatedAt: Date.now() }, append: { artifacts: [artifact('answer')] } }));
    });
    const seen: string[][] = [];
    await new TaskStore(db, 60_000).transition(
      new AbortController().signal,
      task!.id,
      (_t, held) => {
        seen.push([...held!.artifacts]);
        return { next: { state: 'completed', updatedAt: Date.now() }, append: { artifacts: [artifact('answer')].filter((a) => !held!.artifacts.has(a.id)) } };
      },
      { held: true },
    );
    expect(seen).toEqual([[], ['answer']]);
    expect(counts.transaction).toBe(1);
    const stored = (await stack.replicas[0]!.getTask({ taskId: task!.id }, sender.as)).task!;
    expect([stored.state, stored.version, stored.artifacts.map((a) => a.name)]).toEqual([TaskState.COMPLETED, 3n, ['answer']]);
  });
});
