import { burstUntilGrouped, hubModes, startTestHub, type Agent, type RpcReply, type TestHub } from './harness.js';

/**
 * Issue 14, items 3 and 4, over HTTP on both backends and both JSON-RPC endpoints: a repeated
 * messageId from the same sender is the same send, within the idempotency window; a conversation
 * (contextId) belongs to the agents whose tasks are in it.
 */

const A2A = { 'A2A-Version': '1.0' };
const WINDOW_MS = 1500;

describe.each(hubModes().map((m) => [m.name, m] as const))('sends and conversations (%s)', (_name, backend) => {
  let hub: TestHub;
  let alice: Agent;
  let bob: Agent;
  let carol: Agent;
  let dave: Agent;

  beforeAll(async () => {
    hub = await startTestHub(backend, { MESSAGING_IDEMPOTENCY_WINDOW_MS: String(WINDOW_MS) });
    alice = await hub.agent('acme', 'alice');
    bob = await hub.agent('acme', 'bob');
    carol = await hub.agent('acme', 'carol');
    dave = await hub.agent('acme', 'dave');
  });
  afterAll(() => hub?.stop());

  let n = 0;
  const fresh = (prefix: string) => `${prefix}-${Date.now()}-${n++}`;
  const call = (who: Agent, method: string, params: unknown, path?: string): Promise<RpcReply> =>
    hub.call(who.api_key, method, params, { headers: A2A, ...(path ? { path } : {}) });
  async function ok(who: Agent, method: string, params: unknown, path?: string) {
    const reply = await call(who, method, params, path);
    if (reply.body.error) throw new Error(`${method} failed: ${JSON.stringify(reply.body.error)}`);
    return reply.body.result;
  }
  /** SendMessage on the hub endpoint (`/a2a`, the interface's dialect). */
  const send = (who: Agent, to: Agent, message: Record<string, unknown>, configuration: Record<string, unknown> = {}) =>
    call(who, 'SendMessage', { message: { role: 'user', parts: [{ kind: 'text', text: 'hi' }], ...message }, configuration: { agentId: to.agent_id, ...configuration } });
  /** SendMessage on the strict A2A 1.0 endpoint of `to`, returning at once. */
  const strictSend = (who: Agent, to: Agent, message: Record<string, unknown>) =>
    call(who, 'SendMessage', { message: { role: 'ROLE_USER', parts: [{ text: 'hi' }], ...message }, configuration: { returnImmediately: true } }, `/agents/${to.agent_id}/a2a/v1`);
  const strictField = (reply: RpcReply) => reply.body.error?.data?.[0]?.metadata?.field;
  const tasksIn = async (who: Agent, contextId: string) => (await ok(who, 'ListTasks', { contextId })).tasks.map((t: any) => t.id).sort();

  describe('idempotent sends', () => {
    it('the same messageId and body from the same sender is one task, even when sent at once', async () => {
      const messageId = fresh('m');
      const first = (await send(alice, bob, { messageId })).body.result;
      const again = (await send(alice, bob, { messageId })).body.result;
      expect(again.id).toBe(first.id);
      const racing = fresh('race');
      const raced = await Promise.all([1, 2, 3, 4, 5].map(() => send(alice, bob, { messageId: racing })));
      expect(new Set(raced.map((r) => r.body.result?.id)).size).toBe(1);
      expect(raced[0]!.body.result.id).toEqual(expect.any(String));
      // One task, one delivery: the recipient sees the message once.
      const { tasks } = await ok(bob, 'ListTasks', { contextId: raced[0]!.body.result.contextId });
      expect(tasks.map((t: any) => t.id)).toEqual([raced[0]!.body.result.id]);
    });

    it('a different body under a used messageId is -32602 naming message.messageId, and creates nothing', async () => {
      const messageId = fresh('m');
      const first = (await send(alice, bob, { messageId })).body.result;
      const changed = await send(alice, bob, { messageId, parts: [{ kind: 'text', text: 'something else' }] });
      expect(changed.body.error).toMatchObject({ code: -32602, data: { field: 'message.messageId' } });
      const elsewhere = await send(alice, carol, { messageId });
      expect(elsewhere.body.error).toMatchObject({ code: -32602, data: { field: 'message.messageId' } });
      expect(await tasksIn(alice, first.contextId)).toEqual([first.id]);
    });

    it('another sender may use the same messageId; a refused send does not use it up', async () => {
      const messageId = fresh('m');
      const mine = (await send(alice, bob, { messageId })).body.result;
      const theirs = (await send(carol, bob, { messageId })).body.result;
      expect(theirs.id).not.toBe(mine.id);
      const refusedId = fresh('m');
      expect((await send(alice, { ...bob, agent_id: 'agent_nobody' }, { messageId: refusedId })).body.error).toMatchObject({ code: -32101 });
      expect((await send(alice, bob, { messageId: refusedId })).body.result.status.state).toBe('submitted');
    });

    it('after the window the same messageId is a new send', async () => {
      const messageId = fresh('m');
      const first = (await send(alice, bob, { messageId })).body.result;
      await new Promise((resolve) => setTimeout(resolve, WINDOW_MS + 200));
      const later = (await send(alice, bob, { messageId })).body.result;
      expect(later.id).not.toBe(first.id);
    });

    it('the strict endpoint: a repeat is the first task; a different body is -32602', async () => {
      const messageId = fresh('s');
      const first = (await strictSend(alice, bob, { messageId })).body.result.task;
      const again = (await strictSend(alice, bob, { messageId })).body.result.task;
      expect(again.id).toBe(first.id);
      const changed = await strictSend(alice, bob, { messageId, parts: [{ text: 'other' }] });
      expect([changed.body.error?.code, strictField(changed)]).toEqual([-32602, 'message.messageId']);
    });
  });

  describe('conversations belong to their participants', () => {
    it('a third agent cannot send into another pair\'s context, on either endpoint; the recipient\'s ListTasks stays theirs', async () => {
      const first = (await send(alice, bob, {})).body.result;
      const intruding = await send(carol, bob, {}, { contextId: first.contextId });
      expect(intruding.body.error).toMatchObject({ code: -32001, message: 'Context not found', data: { field: 'message.contextId' } });
      const strict = await strictSend(carol, bob, { messageId: fresh('s'), contextId: first.contextId });
      expect([strict.body.error?.code, strictField(strict)]).toEqual([-32001, 'message.contextId']);
      // The same answer as for a task that does not exist: nothing says whose context it is.
      expect((await call(carol, 'GetTask', { id: first.id })).body.error).toMatchObject({ code: -32001 });
      expect(await tasksIn(bob, first.contextId)).toEqual([first.id]);
    });

    it('either participant continues the conversation, and may bring in another agent', async () => {
      const first = (await send(alice, bob, {})).body.result;
      const reply = (await send(bob, alice, {}, { contextId: first.contextId })).body.result;
      const widened = (await send(alice, carol, {}, { contextId: first.contextId })).body.result;
      expect([reply.contextId, widened.contextId]).toEqual([first.contextId, first.contextId]);
      expect(await tasksIn(carol, first.contextId)).toEqual([widened.id]);
      // Carol now has a task in it, so she may write there too.
      expect((await send(carol, bob, {}, { contextId: first.contextId })).body.result.contextId).toBe(first.contextId);
    });

    it('a context id of the caller\'s choosing is theirs once first used; another agent cannot take it', async () => {
      const contextId = fresh('ctx-chosen');
      const started = (await send(alice, bob, {}, { contextId })).body.result;
      expect(started.contextId).toBe(contextId);
      expect((await send(dave, carol, {}, { contextId })).body.error).toMatchObject({ code: -32001 });
      const racing = fresh('ctx-race');
      const raced = await Promise.all([alice, carol, dave].map((who) => send(who, bob, {}, { contextId: racing })));
      expect(raced.filter((r) => r.body.result).length).toBe(1);
      expect(raced.filter((r) => r.body.error?.code === -32001).length).toBe(2);
    });
  });

  describe('sends that travel together', () => {
    it('concurrent non-blocking sends from several agents share round trips, and each is answered, owned and refused as its own', async () => {
      const nobody = { ...bob, agent_id: 'agent_nobody' };
      const refusedAlone = (await send(alice, nobody, { messageId: fresh('alone') })).body.error;
      expect(refusedAlone).toMatchObject({ code: -32101 });
      const groups = await burstUntilGrouped(hub, 'SendMessages', async (burst) => {
        const plan = Array.from({ length: 40 }, (_, i) => ({ from: i % 2 ? carol : alice, to: i === 17 ? nobody : i % 3 ? bob : dave, messageId: fresh(`burst${burst}-${i}`) }));
        const replies = await Promise.all(plan.map(({ from, to, messageId }) => send(from, to, { messageId })));
        replies.forEach((reply, i) => {
          if (i === 17) expect(reply.body.error).toEqual(refusedAlone);
          else expect(reply.body.result?.status.state).toBe('submitted');
        });
        // Each task is its sender's and its recipient's, and nobody else's.
        for (const [i, reply] of replies.entries()) {
          if (i === 17) continue;
          const { from, to } = plan[i]!;
          const other = from === alice ? carol : alice;
          expect((await ok(from, 'GetTask', { id: reply.body.result.id })).id).toBe(reply.body.result.id);
          expect((await ok(to, 'GetTask', { id: reply.body.result.id })).id).toBe(reply.body.result.id);
          expect((await call(other, 'GetTask', { id: reply.body.result.id })).body.error).toMatchObject({ code: -32001 });
        }
      });
      expect(groups.after).toBeGreaterThan(groups.before);
    });
  });
});
