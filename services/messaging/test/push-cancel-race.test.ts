import { create } from '@bufbuild/protobuf';
import { messagingv1 } from '@agenthub/proto';
import { egressPolicy, Metrics, type CallContext, type Db } from '@agenthub/runtime';
import { backends, testLogger } from '@agenthub/testing';
import { startPushWorker, type IdentityClient, type MessagingEnv } from '../src/index.js';
import { PushStore, type PushTaskRecord } from '../src/push-store.js';
import { cancelTask } from '../src/tasks.js';
import { eventually, newTaskRecord, openMessagingEnv, startRecorder, type Recorder } from './push-stack.js';

/**
 * Issue 17 item 5: the push cancel race fixed in 48ea42b, driven step by step. A follow-up of a
 * push task is claimed while the hub task still works; the sender cancels it before the worker
 * reads the hub task; the worker then finds the task canceled and stops following it. The cancel
 * requested in between must survive that stop and reach the agent. The claim is the seam: the
 * cancel runs after the claim returned and before the worker sees its result, every time.
 */

const SENDER = { agentId: 'agent_sender', tenantId: 'acme' };
const PUSH_AGENT = 'agent_push';
const TASK = 'task_race';
const REMOTE_TASK = 'remote-task-1';

/** Identity as the worker asks it: every agent of one tenant (no grants needed). */
const identity = {
  getAgent: async ({ agentId }: { agentId: string }) => ({ agent: { id: agentId, tenantId: 'acme' } }),
  checkGrant: async () => ({ approved: true }),
} as unknown as IdentityClient;

describe.each(backends().map((b) => [b.name, b] as const))('push cancel race (%s)', (_name, backend) => {
  let opened: Awaited<ReturnType<typeof openMessagingEnv>>;
  let db: Db;
  let env: MessagingEnv;
  let agent: Recorder;

  beforeAll(async () => {
    opened = await openMessagingEnv(backend, identity);
    ({ db, env } = opened);
    // The agent's answers do not matter here; only what it was asked.
    agent = await startRecorder(() => ({ status: 200, body: '{"jsonrpc":"2.0","id":1,"result":{}}' }));
  });
  afterAll(async () => {
    await agent?.close();
    await opened?.close();
  });

  it('a cancel requested between the claim of a follow-up and its look at the hub task is forwarded to the agent', async () => {
    const signal = new AbortController().signal;
    await env.tasks.createTask(
      signal,
      newTaskRecord({
        id: TASK,
        contextId: 'ctx_race',
        senderAgentId: SENDER.agentId,
        senderTenantId: SENDER.tenantId,
        recipientAgentId: PUSH_AGENT,
        state: 'working',
        messages: [{ role: 'user', messageId: 'msg_race', parts: [{ text: { text: 'take your time' } }] }],
      }),
      undefined,
    );
    await env.pushes.recordPushAgent(signal, PUSH_AGENT, `${agent.url}/a2a`, 'acme');
    // The agent is working on its task: a follow-up is due now.
    await env.pushes.savePushTask(signal, TASK, PUSH_AGENT, REMOTE_TASK, Date.now(), 10);

    const ctx: CallContext = { principal: { kind: 'agent', ...SENDER }, deadline: undefined, signal: new AbortController().signal, log: testLogger() };
    let canceledInBetween = false;
    class CancelAfterClaim extends PushStore {
      override async claimPushFollowUps(...args: Parameters<PushStore['claimPushFollowUps']>): Promise<PushTaskRecord[]> {
        const claimed = await super.claimPushFollowUps(...args);
        if (!canceledInBetween && claimed.some((push) => push.taskId === TASK && !push.cancelRequested)) {
          canceledInBetween = true;
          await cancelTask(env, ctx, SENDER, create(messagingv1.CancelTaskRequestSchema, { taskId: TASK }));
        }
        return claimed;
      }
    }

    const stop = startPushWorker({ ...env, pushes: new CancelAfterClaim(db) }, {
      log: testLogger(),
      metrics: new Metrics(),
      policy: egressPolicy(true),
      credentials: async () => '',
      options: { pollMs: 50, timeoutMs: 2_000 },
    });
    try {
      const asked = () => agent.received.map((r) => JSON.parse(r.body) as { method: string; params: { id: string } });
      await eventually(async () => asked().some((call) => call.method === 'CancelTask'), 'the cancel to reach the agent');
      expect(canceledInBetween).toBe(true);
      // The follow-up found the hub task canceled and asked nothing else; then the cancel went out, once.
      expect(asked().map((call) => [call.method, call.params.id])).toEqual([['CancelTask', REMOTE_TASK]]);
      expect((await env.tasks.getTask(signal, TASK, false))?.state).toBe('canceled');
      // Forwarded: nothing left to do for the task.
      await eventually(async () => {
        const { rows } = await db.query<{ follow_at: string | null; cancel_requested: boolean }>('SELECT follow_at, cancel_requested FROM push_tasks WHERE task_id = $1', [TASK]);
        return rows[0]?.follow_at === null && !rows[0].cancel_requested;
      }, 'the follow-up to end');
    } finally {
      await stop();
    }
  });
});
