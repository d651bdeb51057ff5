import { messagingv1 } from '@agenthub/proto';
import { Reason } from '@agenthub/runtime';
import { backends } from '@agenthub/testing';
import { failure, startStack, type Stack, type TestAgent } from './harness.js';

/**
 * WatchTask (the stream behind SendStreamingMessage and SubscribeToTask) and ListTasks over gRPC,
 * with two replicas: a watcher on one replica hears transitions made on the other, and a watcher
 * resuming after a version receives exactly the transitions it missed.
 */

const { TaskState } = messagingv1;
const text = (t: string) => ({ content: { case: 'text' as const, value: { text: t } } });
const message = (t: string) => ({ role: 'user', parts: [text(t)] });

type Event = messagingv1.WatchTaskResponse['event'];

/** Collects a stream's events until it ends. */
async function collect(stream: AsyncIterable<messagingv1.WatchTaskResponse>): Promise<Event[]> {
  const events: Event[] = [];
  for await (const item of stream) events.push(item.event);
  return events;
}

/** A stream whose first event has been read (the watcher is subscribed), and the rest to collect. */
async function started(stream: AsyncIterable<messagingv1.WatchTaskResponse>): Promise<{ first: Event; rest: () => Promise<Event[]> }> {
  const iterator = stream[Symbol.asyncIterator]();
  const head = await iterator.next();
  if (head.done) throw new Error('the stream ended before its first event');
  return {
    first: head.value.event,
    rest: async () => {
      const events: Event[] = [];
      for (let item = await iterator.next(); !item.done; item = await iterator.next()) events.push(item.value.event);
      return events;
    },
  };
}

/** Reads events until `n` arrived, then leaves the stream open for the caller to cancel. */
async function take(stream: AsyncIterable<messagingv1.WatchTaskResponse>, n: number): Promise<Event[]> {
  const events: Event[] = [];
  for await (const item of stream) {
    events.push(item.event);
    if (events.length === n) break;
  }
  return events;
}

const summary = (events: Event[]) =>
  events.map((e) =>
    e.case === 'task'
      ? `task:${TaskState[e.value.state]}@${e.value.version}`
      : e.case === 'transition'
        ? `${TaskState[e.value.state]}@${e.value.version}${e.value.artifacts.length ? `+${e.value.artifacts.length}art` : ''}${e.value.final ? ' final' : ''}`
        : 'unknown',
  );

describe.each(backends().map((b) => [b.name, b] as const))('task streams and listing (%s)', (_name, backend) => {
  let stack: Stack;
  let sender: TestAgent;
  let recipient: TestAgent;

  beforeAll(async () => {
    stack = await startStack(backend, { replicas: 2 });
    sender = await stack.agent('acme', 'sender');
    recipient = await stack.agent('acme', 'recipient');
  });
  afterAll(() => stack?.stop());

  const [a, b] = [() => stack.replicas[0]!, () => stack.replicas[1]!];
  const artifact = (t: string) => ({ name: 'out', mimeType: 'text/plain', parts: [text(t)] });

  it('a watcher on one replica gets the task, then every transition made on the other, and the stream ends at the terminal one', async () => {
    const { task } = await a().sendMessage({ recipientAgentId: recipient.id, message: message('work') }, sender.as);
    // The first event proves the watcher is subscribed before the recipient moves the task.
    const watching = await started(b().watchTask({ taskId: task!.id }, { ...sender.as, timeoutMs: 30_000 }));
    await a().updateTask({ taskId: task!.id, state: TaskState.WORKING }, recipient.as);
    await a().updateTask({ taskId: task!.id, state: TaskState.WORKING, artifacts: [artifact('partial')] }, recipient.as);
    await a().updateTask(
      { taskId: task!.id, state: TaskState.COMPLETED, message: { role: 'agent', parts: [text('done')] }, artifacts: [artifact('final')] },
      recipient.as,
    );
    const events = [watching.first, ...(await watching.rest())];
    expect(summary(events)).toEqual(['task:SUBMITTED@1', 'WORKING@2', 'WORKING@3+1art', 'COMPLETED@4+1art final']);
    const last = events.at(-1)!;
    expect(last.case === 'transition' && last.value.message?.parts[0]?.content).toEqual({ case: 'text', value: expect.objectContaining({ text: 'done' }) });
  });

  it('resuming after a version sends only the later transitions, none lost while away', async () => {
    const { task } = await a().sendMessage({ recipientAgentId: recipient.id, message: message('resume') }, sender.as);
    const controller = new AbortController();
    const first = await take(a().watchTask({ taskId: task!.id }, { ...sender.as, signal: controller.signal, timeoutMs: 30_000 }), 1);
    controller.abort();
    expect(summary(first)).toEqual(['task:SUBMITTED@1']);
    // While nobody watches, the task moves three times.
    await b().updateTask({ taskId: task!.id, state: TaskState.WORKING }, recipient.as);
    await b().updateTask({ taskId: task!.id, state: TaskState.INPUT_REQUIRED, message: { role: 'agent', parts: [text('which?')] } }, recipient.as);
    // Its first event (the first missed transition) shows the resumed watcher is running.
    const resumed = await started(a().watchTask({ taskId: task!.id, afterVersion: 1n }, { ...sender.as, timeoutMs: 30_000 }));
    await b().sendMessage({ taskId: task!.id, message: message('the blue one') }, sender.as);
    await b().updateTask({ taskId: task!.id, state: TaskState.COMPLETED }, recipient.as);
    expect(summary([resumed.first, ...(await resumed.rest())])).toEqual(['WORKING@2', 'INPUT_REQUIRED@3', 'SUBMITTED@4', 'COMPLETED@5 final']);
  });

  it('watching a finished task gives the task and ends; resuming after its last version gives nothing', async () => {
    const { task } = await a().sendMessage({ recipientAgentId: recipient.id, message: message('cancel me') }, sender.as);
    const canceled = (await a().cancelTask({ taskId: task!.id }, sender.as)).task!;
    expect(summary(await collect(b().watchTask({ taskId: task!.id }, sender.as)))).toEqual([`task:CANCELED@${canceled.version}`]);
    expect(await collect(b().watchTask({ taskId: task!.id, afterVersion: canceled.version }, sender.as))).toEqual([]);
  });

  it('only the sender and the recipient can watch a task', async () => {
    const stranger = await stack.agent('acme', 'stranger');
    const { task } = await a().sendMessage({ recipientAgentId: recipient.id, message: message('private') }, sender.as);
    const err = await failure(collect(a().watchTask({ taskId: task!.id }, stranger.as)));
    expect(err.reason).toBe(Reason.TASK_NOT_FOUND);
    const bad = await failure(collect(a().watchTask({ taskId: task!.id, historyLength: -1 }, sender.as)));
    expect(bad.reason).toBe(Reason.INVALID_PARAMS);
  });

  it('lists the caller\'s tasks newest first, page by page, filtered by context and state', async () => {
    const lister = await stack.agent('acme', 'lister');
    const peer = await stack.agent('acme', 'peer');
    const ids: string[] = [];
    for (let i = 0; i < 5; i += 1) {
      stack.clock.advance(1_000);
      ids.push((await a().sendMessage({ recipientAgentId: peer.id, message: message(`n${i}`), contextId: i < 3 ? 'ctx-a' : 'ctx-b' }, lister.as)).task!.id);
    }
    stack.clock.advance(1_000);
    await a().updateTask({ taskId: ids[0]!, state: TaskState.COMPLETED, artifacts: [artifact('x')] }, peer.as);

    const first = await b().listTasks({ pageSize: 2 }, lister.as);
    expect(first.totalSize).toBe(5);
    expect(first.tasks.map((t) => t.id)).toEqual([ids[0], ids[4]]);
    expect(first.tasks[0]!.artifacts).toEqual([]);
    const second = await b().listTasks({ pageSize: 2, pageToken: first.nextPageToken }, lister.as);
    const third = await b().listTasks({ pageSize: 2, pageToken: second.nextPageToken }, lister.as);
    expect([...second.tasks, ...third.tasks].map((t) => t.id)).toEqual([ids[3], ids[2], ids[1]]);
    expect(third.nextPageToken).toBe('');

    const filtered = await b().listTasks({ contextId: 'ctx-a', state: TaskState.SUBMITTED, historyLength: 0 }, lister.as);
    expect(filtered.tasks.map((t) => t.id)).toEqual([ids[2], ids[1]]);
    expect(filtered.tasks[0]!.messages).toEqual([]);
    const withArtifacts = await b().listTasks({ state: TaskState.COMPLETED, includeArtifacts: true }, peer.as);
    expect(withArtifacts.tasks.map((t) => [t.id, t.artifacts.length])).toEqual([[ids[0], 1]]);

    const stranger = await stack.agent('acme', 'nobody');
    expect((await a().listTasks({ peerAgentId: peer.id }, lister.as)).totalSize).toBe(5);
    expect((await a().listTasks({ peerAgentId: lister.id }, peer.as)).totalSize).toBe(5);
    expect((await a().listTasks({ peerAgentId: stranger.id }, lister.as)).tasks).toEqual([]);
    expect((await a().listTasks({}, stranger.as)).tasks).toEqual([]);
    expect((await failure(a().listTasks({ pageToken: 'not-ours' }, lister.as))).reason).toBe(Reason.INVALID_PARAMS);
    expect((await failure(a().listTasks({ pageSize: 500 }, lister.as))).reason).toBe(Reason.INVALID_PARAMS);
  });
});
