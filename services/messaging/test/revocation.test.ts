import { messagingv1 } from '@agenthub/proto';
import { Reason } from '@agenthub/runtime';
import { backends } from '@agenthub/testing';
import { failure, startStack, type Stack, type TestAgent } from './harness.js';

/**
 * Issue 12 item 5: a revoked cross-tenant grant reaches every path of a task, not only new sends.
 * The sender's continuation (`task_id`) is refused exactly as a new send is; the recipient can no
 * longer move the task or add to it; either side may still read or cancel what they shared.
 */

const { TaskState } = messagingv1;
const text = (t: string) => ({ content: { case: 'text' as const, value: { text: t } } });
const message = (t: string) => ({ role: 'user', parts: [text(t)] });

describe.each(backends().map((b) => [b.name, b] as const))('grant revocation on tasks (%s)', (_name, backend) => {
  let stack: Stack;
  let sender: TestAgent;
  let recipient: TestAgent;

  beforeAll(async () => {
    stack = await startStack(backend);
    sender = await stack.agent('acme', 'sender');
    recipient = await stack.agent('globex', 'recipient');
  });
  afterAll(() => stack?.stop());

  const grant = async () => {
    const { grant } = await stack.identity.requestGrant({ agentId: recipient.id }, sender.as);
    await stack.identity.approveGrant({ grantId: grant!.id }, recipient.as);
    return grant!.id;
  };

  it('a continuation after the grant was revoked is refused like a new send, and changes nothing', async () => {
    const grantId = await grant();
    const [messaging] = stack.replicas;
    const { task } = await messaging!.sendMessage({ recipientAgentId: recipient.id, message: message('Which quarter?') }, sender.as);
    await messaging!.updateTask({ taskId: task!.id, state: TaskState.INPUT_REQUIRED, message: { role: 'agent', parts: [text('Q1 or Q2?')] } }, recipient.as);
    await stack.identity.revokeGrant({ grantId }, recipient.as);

    const fresh = await failure(messaging!.sendMessage({ recipientAgentId: recipient.id, message: message('New question') }, sender.as));
    const continued = await failure(messaging!.sendMessage({ taskId: task!.id, message: message('Q1') }, sender.as));
    expect(fresh.reason).toBe(Reason.GRANT_REQUIRED);
    expect([continued.reason, continued.message]).toEqual([fresh.reason, fresh.message]);

    const after = (await messaging!.getTask({ taskId: task!.id }, sender.as)).task!;
    expect([after.state, after.messages.length]).toEqual([TaskState.INPUT_REQUIRED, 2]);
    // Only the first send's delivery is queued: the refused continuation queued nothing.
    const { rows } = await stack.db.query<{ n: string | number }>('SELECT count(*) AS n FROM deliveries WHERE task_id = $1', [task!.id]);
    expect(Number(rows[0]!.n)).toBe(1);
  });

  it('the recipient cannot move or add to the task once the grant is revoked; both may still read and cancel', async () => {
    const grantId = await grant();
    const [messaging] = stack.replicas;
    const { task } = await messaging!.sendMessage({ recipientAgentId: recipient.id, message: message('Summarise') }, sender.as);
    await messaging!.updateTask({ taskId: task!.id, state: TaskState.WORKING }, recipient.as);
    await stack.identity.revokeGrant({ grantId }, sender.as);

    const update = await failure(
      messaging!.updateTask(
        { taskId: task!.id, state: TaskState.COMPLETED, artifacts: [{ name: 'summary', parts: [text('after revocation')] }] },
        recipient.as,
      ),
    );
    expect(update.reason).toBe(Reason.GRANT_REQUIRED);
    const seen = (await messaging!.getTask({ taskId: task!.id }, recipient.as)).task!;
    expect([seen.state, seen.artifacts.length]).toEqual([TaskState.WORKING, 0]);

    const canceled = (await messaging!.cancelTask({ taskId: task!.id }, sender.as)).task!;
    expect(canceled.state).toBe(TaskState.CANCELED);
  });
});
