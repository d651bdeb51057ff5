import { create } from '@bufbuild/protobuf';
import { messagingv1 } from '@agenthub/proto';
import { MemoryKv, type CallContext } from '@agenthub/runtime';
import { backends, testLogger } from '@agenthub/testing';
import { messagingEnv } from '../src/env.js';
import { SendKeyStore, type SendKey } from '../src/send-key-store.js';
import { sendMessageOnce } from '../src/send-once.js';
import { counting, startStack, type Stack, type TestAgent } from './harness.js';

/**
 * A repeated messageId is the same send. A new task claims its key in the statement that writes
 * it; a follow-up reserves its key first. Either way the keys of one turn share a statement.
 */

const WINDOW_MS = 60_000;
const never = new AbortController().signal;

describe.each(backends().map((b) => [b.name, b] as const))('send keys (%s)', (_name, backend) => {
  let stack: Stack;
  let statements: string[];
  let keys: SendKeyStore;
  beforeAll(async () => {
    stack = await startStack(backend);
  });
  afterAll(() => stack?.stop());
  beforeEach(() => {
    statements = [];
    keys = new SendKeyStore(counting(stack.db, statements), WINDOW_MS);
  });

  const key = (taskId: string, createdAt = Date.now()): SendKey => ({ taskId, bodyHash: `hash_${taskId}`, createdAt });

  it('reserves the keys of the sends that reach it in one turn in one statement', async () => {
    const ids = Array.from({ length: 5 }, (_, i) => `turn_${i}`);
    const earlier = await Promise.all(ids.map((id) => keys.reserve(never, 'agt_turn', `msg_${id}`, key(`task_${id}`))));
    expect(earlier).toEqual([undefined, undefined, undefined, undefined, undefined]);
    expect(statements).toHaveLength(1);
    for (const id of ids) expect((await keys.get(never, 'agt_turn', `msg_${id}`))?.taskId).toBe(`task_${id}`);
  });

  it('gives one key to the first of two sends in one turn, and the other the first one', async () => {
    const [first, second] = await Promise.all([
      keys.reserve(never, 'agt_twice', 'msg_twice', key('task_one')),
      keys.reserve(never, 'agt_twice', 'msg_twice', key('task_two')),
    ]);
    const winner = first === undefined ? 'task_one' : 'task_two';
    expect([first, second].filter((earlier) => earlier === undefined)).toHaveLength(1);
    expect((first ?? second)?.taskId).toBe(winner);
    expect((await keys.get(never, 'agt_twice', 'msg_twice'))?.taskId).toBe(winner);
  });

  it('tells follow-ups of one task apart by their messageIds, and a repeated follow-up from a new one', async () => {
    await keys.reserve(never, 'agt_follow', 'msg_follow_1', key('task_follow'));
    const [repeat, next] = await Promise.all([
      keys.reserve(never, 'agt_follow', 'msg_follow_1', key('task_follow')),
      keys.reserve(never, 'agt_follow', 'msg_follow_2', key('task_follow')),
    ]);
    expect(repeat?.taskId).toBe('task_follow');
    expect(next).toBeUndefined();
  });

  it('gives a key back to a new send once the window has passed, and not before', async () => {
    const then = Date.now() - WINDOW_MS - 1_000;
    await keys.reserve(never, 'agt_window', 'msg_old', key('task_old', then));
    await keys.reserve(never, 'agt_window', 'msg_recent', key('task_recent', Date.now() - WINDOW_MS + 10_000));
    const [old, recent] = await Promise.all([
      keys.reserve(never, 'agt_window', 'msg_old', key('task_old_again')),
      keys.reserve(never, 'agt_window', 'msg_recent', key('task_recent_again')),
    ]);
    expect(old).toBeUndefined();
    expect(recent?.taskId).toBe('task_recent');
  });

  it('refuses a send whose caller already gave up, reserving nothing', async () => {
    const gone = AbortSignal.abort();
    await expect(keys.reserve(gone, 'agt_gone', 'msg_gone', key('task_gone'))).rejects.toThrow();
    expect(await keys.get(never, 'agt_gone', 'msg_gone')).toBeUndefined();
  });

  describe('sends of new tasks', () => {
    const ctx = (agent: TestAgent): CallContext => ({ principal: agent.as.principal, deadline: undefined, signal: new AbortController().signal, log: testLogger() });
    const caller = (agent: TestAgent) => ({ agentId: agent.id, tenantId: agent.tenantId });
    const send = (recipient: TestAgent, messageId: string, text = 'hello') =>
      create(messagingv1.SendMessageRequestSchema, { recipientAgentId: recipient.id, message: { role: 'user', messageId, parts: [{ content: { case: 'text', value: { text } } }] } });

    it('claim their keys in the statement that writes their tasks', async () => {
      const env = messagingEnv({ db: counting(stack.db, statements), kv: new MemoryKv(), identity: stack.identity });
      const sender = await stack.agent('acme', 'keyed-sender');
      const recipient = await stack.agent('acme', 'keyed-recipient');
      statements.length = 0;
      const sent = await Promise.all([1, 2, 3, 4, 5].map((n) => sendMessageOnce(env, ctx(sender), caller(sender), send(recipient, `msg_new_${n}`))));
      // Before, each group of keys took a statement and a commit of its own ahead of its tasks'.
      const keyed = statements.filter((sql) => sql.includes('send_keys'));
      expect(keyed.length).toBeGreaterThan(0);
      expect(keyed.filter((sql) => !sql.includes('INSERT INTO tasks'))).toEqual([]);
      for (const [i, { task }] of sent.entries()) expect((await keys.get(never, sender.id, `msg_new_${i + 1}`))?.taskId).toBe(task!.id);
    });

    it('answer a repeat with the first task even when the send itself would now be refused', async () => {
      const env = messagingEnv({ db: stack.db, kv: new MemoryKv(), identity: stack.identity, limits: { maxTasksInFlightPerSender: 1 } });
      const sender = await stack.agent('acme', 'repeat-sender');
      const recipient = await stack.agent('acme', 'repeat-recipient');
      const { task: first } = await sendMessageOnce(env, ctx(sender), caller(sender), send(recipient, 'msg_repeat'));
      // The first task is in flight, so the sender is at its quota: a new send is refused, a repeat is not.
      await expect(sendMessageOnce(env, ctx(sender), caller(sender), send(recipient, 'msg_other'))).rejects.toMatchObject({ field: 'tasks_in_flight_per_sender' });
      const { task: again } = await sendMessageOnce(env, ctx(sender), caller(sender), send(recipient, 'msg_repeat'));
      expect(again!.id).toBe(first!.id);
      await expect(sendMessageOnce(env, ctx(sender), caller(sender), send(recipient, 'msg_repeat', 'changed'))).rejects.toMatchObject({ field: 'message.messageId' });
      expect(await keys.get(never, sender.id, 'msg_other')).toBeUndefined();
    });
  });
});
