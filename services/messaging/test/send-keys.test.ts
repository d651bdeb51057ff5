import { backends } from '@agenthub/testing';
import { SendKeyStore, type SendKey } from '../src/send-key-store.js';
import { counting, startStack, type Stack } from './harness.js';

/** A repeated messageId is the same send: each send reserves its key first, grouped with the others of its turn. */

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
});
