/**
 * Forwarding one delivery to a push agent, and following up the agent's task: the A2A calls
 * (push-calls.ts), their verdicts, and what the answers do to the hub task (push-relay.ts).
 * The worker (push.ts) decides when and in which slot each runs.
 */
import type { Message as A2AMessage, Task as A2ATask } from '@a2a-js/sdk';
import { contextOf, detachedSignal, SpanKind, withSpan, type Logger } from '@agenthub/runtime';
import { FINAL, isSettled, stateFromAgent } from '@agenthub/tasks';
import { toA2AMessage } from './a2a-codec.js';
import type { Outcome, PushCaller } from './push-calls.js';
import { GRANT_REVOKED_TEXT, nextDelay, type Next, type PushRelay } from './push-relay.js';
import type { ClaimedDelivery, PushAgentRecord, PushTaskRecord } from './push-store.js';
import type { MessagingEnv } from './env.js';

/** How forwarding one delivery ended: `skipped` when it waited behind its task's earlier one, which did not go through. */
export type Forwarded = 'done' | 'unavailable' | 'stopped' | 'skipped';

/** When the worker looks for due follow-ups and cancels again. */
export interface FollowUpSchedule {
  now(): void;
  in(ms: number): void;
}

export class PushForwarder {
  constructor(
    private readonly env: MessagingEnv,
    private readonly caller: PushCaller,
    private readonly relay: PushRelay,
    private readonly schedule: FollowUpSchedule,
    private readonly maxBackoffMs: number,
    private readonly stopping: AbortSignal,
    private readonly log: Logger,
  ) {}

  /** Forwards one claimed delivery, after the same task's earlier one (which must have gone through). */
  async forward(agent: PushAgentRecord, item: ClaimedDelivery, before: Promise<Forwarded> | undefined): Promise<Forwarded> {
    if (before) {
      if ((await before) !== 'done') {
        // Not forwarded ahead of its task's earlier message: given back uncounted.
        await this.env.deliveries.releaseClaims(detachedSignal(), agent.agentId, [item.delivery.id]);
        return 'skipped';
      }
      // The earlier one may have ended the task or created the agent's task this one continues.
      const task = await this.env.tasks.getTask(detachedSignal(), item.task.id, false);
      if (!task) return 'done';
      item = { ...item, task, remoteTaskId: (await this.env.pushes.getPushTask(detachedSignal(), item.task.id))?.remoteTaskId };
    }
    // The delivery continues the trace of the send that queued it; the egress client passes it to the agent.
    const span = { kind: SpanKind.PRODUCER, parent: contextOf(item.delivery.traceparent), attributes: { 'agent.id': agent.agentId, 'delivery.id': item.delivery.id } };
    return withSpan('push delivery', span, () => this.deliver(agent, item));
  }

  private async deliver(agent: PushAgentRecord, { delivery, task, remoteTaskId }: ClaimedDelivery): Promise<Forwarded> {
    const { deliveries } = this.env;
    const log = this.log.child({ agent_id: agent.agentId, task_id: task.id, delivery_id: delivery.id, attempt: delivery.attempts });
    if (FINAL.has(task.state)) {
      await deliveries.ackDelivery(detachedSignal(), agent.agentId, delivery.id);
      return 'done';
    }
    if (!(await this.relay.granted(task))) {
      await this.relay.fail(task.id, GRANT_REVOKED_TEXT);
      await deliveries.ackDelivery(detachedSignal(), agent.agentId, delivery.id);
      log.info('not forwarded: the access grant between the agents was revoked');
      return 'done';
    }
    const secret = this.caller.secret(agent.agentId);
    const message = toA2AMessage(delivery.message, { contextId: delivery.contextId, taskId: remoteTaskId ?? '' });
    // returnImmediately: the agent accepts and works on its own time; the worker follows up.
    const outcome = await this.caller.call('SendMessage', agent, secret, log, (client, options) =>
      client.sendMessage(
        {
          tenant: '',
          message,
          configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately: true },
          metadata: undefined,
        },
        options,
      ),
    );
    if (outcome.kind === 'unavailable') {
      await deliveries.releaseDelivery(detachedSignal(), delivery.id);
      return this.stopping.aborted ? 'stopped' : 'unavailable';
    }
    let ended = false;
    if (outcome.kind === 'refused') {
      ended = (await this.relay.fail(task.id, outcome.a2a ? `The agent refused the message: ${outcome.text}` : `The message could not be delivered: ${outcome.text}`)).ended;
    } else {
      const answer = await this.firstLook(agent, task.id, outcome.value, secret, remoteTaskId === undefined, log);
      const relayed = await this.relay.relay(agent.agentId, task, answer, 0, remoteTaskId === undefined, this.maxBackoffMs);
      this.follow(relayed.next);
      ended = relayed.applied.ended;
    }
    // A change that ended the task took its queued deliveries, this one included, in its commit.
    if (!ended) await deliveries.ackDelivery(detachedSignal(), agent.agentId, delivery.id);
    log.info({ outcome: outcome.kind }, 'delivered to push agent');
    return 'done';
  }

  /**
   * An agent that took a new task with returnImmediately usually has it finished by the time its
   * answer arrives: one GetTask at once, in the same slot, spares the exchange a follow-up's
   * wait, claim and extra transition. Any failure leaves the first answer to the follow-ups.
   */
  private async firstLook(
    agent: PushAgentRecord,
    taskId: string,
    answer: A2AMessage | A2ATask,
    secret: Promise<string>,
    unrecorded: boolean,
    log: Logger,
  ): Promise<A2AMessage | A2ATask> {
    if ('messageId' in answer || !unrecorded || isSettled(stateFromAgent(answer.status?.state ?? 0))) return answer;
    const looked = await this.caller.call('GetTask', agent, secret, log.child({ remote_task_id: answer.id, task_id: taskId }), (client, options) =>
      client.getTask({ tenant: '', id: answer.id }, options),
    );
    return looked.kind === 'ok' ? looked.value : answer;
  }

  private follow(next: Next): void {
    if (next.kind === 'cancel') this.schedule.now();
    else if (next.kind === 'follow-up') this.schedule.in(next.inMs);
  }

  /** Asks the agent about its task again (or forwards a cancel of it). */
  async followUp(push: PushTaskRecord): Promise<void> {
    const { tasks, pushes } = this.env;
    const log = this.log.child({ agent_id: push.agentId, task_id: push.taskId, remote_task_id: push.remoteTaskId });
    const secret = this.caller.secret(push.agentId);
    if (push.cancelRequested) {
      await this.caller.call('CancelTask', push, secret, log, (client, options) => client.cancelTask({ tenant: '', id: push.remoteTaskId, metadata: undefined }, options));
      // Cut short by shutdown: due again at once, for another replica.
      if (this.stopping.aborted) await pushes.requestPushCancel(detachedSignal(), push.taskId);
      else await pushes.pushCancelForwarded(detachedSignal(), push.taskId);
      return;
    }
    const task = await tasks.getTask(detachedSignal(), push.taskId, false);
    if (!task || FINAL.has(task.state)) {
      await pushes.stopPushFollowUp(detachedSignal(), push.taskId);
      return;
    }
    const outcome: Outcome<A2ATask> = await this.caller.call('GetTask', push, secret, log, (client, options) =>
      client.getTask({ tenant: '', id: push.remoteTaskId }, options),
    );
    if (outcome.kind === 'ok') {
      this.follow((await this.relay.relay(push.agentId, task, outcome.value, push.followDelayMs, false, this.maxBackoffMs)).next);
    } else if (outcome.kind === 'refused') {
      await this.relay.fail(push.taskId, `The agent could not report on its task: ${outcome.text}`);
      await pushes.stopPushFollowUp(detachedSignal(), push.taskId);
    } else if (this.stopping.aborted) {
      // Cut short by shutdown: due again at once, for another replica.
      await pushes.savePushTask(detachedSignal(), push.taskId, push.agentId, push.remoteTaskId, Date.now(), push.followDelayMs);
    } else {
      const delay = nextDelay(push.followDelayMs, this.maxBackoffMs);
      await pushes.savePushTask(detachedSignal(), push.taskId, push.agentId, push.remoteTaskId, Date.now() + delay, delay);
      this.schedule.in(delay);
    }
  }}
