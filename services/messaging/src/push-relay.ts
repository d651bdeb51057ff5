/**
 * What a push agent answered, moved into the hub task through the store transition UpdateTask
 * uses, and announced on the task's Kv channel: its state, and the agent's messages and artifacts
 * the task does not hold yet. No byte of a refusal reaches the task: failures carry the hub's own
 * fixed texts.
 */
import { Role, TaskState, type Message as A2AMessage, type Task as A2ATask } from '@a2a-js/sdk';
import { fromJson, type JsonValue } from '@bufbuild/protobuf';
import { messagingv1 } from '@agenthub/proto';
import { detachedSignal, HubError, newId, Reason, type CallContext, type Logger } from '@agenthub/runtime';
import { FINAL, isSettled, stateFromAgent } from '@agenthub/tasks';
import { agentText, fromA2AArtifact, fromA2AMessage } from './a2a-codec.js';
import type { PushTaskView } from './push-store.js';
import type { StateName } from './task-store.js';
import type { MessagingEnv } from './env.js';
import { announce } from './lifecycle.js';
import { taskGrowthCheck, validateParts } from './tasks.js';

/** The failed task's message when the grant between sender and push agent was revoked meanwhile. */
export const GRANT_REVOKED_TEXT = 'The access grant between the agents was revoked';

/** The hub task after a change: its state, and whether this change ended it (its queued deliveries went with it). */
export interface Applied {
  state: StateName | undefined;
  ended: boolean;
}

/** What the worker does next about the agent's task. */
export type Next = { kind: 'none' } | { kind: 'follow-up'; inMs: number } | { kind: 'cancel' };

const idOf = (stored: unknown, key: 'messageId' | 'id') => (stored as Record<string, unknown>)[key];

/** The items (with an id) whose id is neither held nor earlier in `items`: an agent repeats them. */
function unseen(items: unknown[], held: ReadonlySet<string>, key: 'messageId' | 'id'): unknown[] {
  const seen = new Set<unknown>(held);
  return items.filter((item) => {
    const id = idOf(item, key);
    if (!id || seen.has(id)) return false;
    seen.add(id);
    return true;
  });
}

/**
 * What an agent answered passes the checks a connected recipient's UpdateTask does (parts,
 * inline file sizes); refused with INVALID_PARAMS naming the item.
 */
function validateAnswer(messages: unknown[], artifacts: unknown[], maxParts: number): void {
  messages.forEach((m, i) => validateParts(fromJson(messagingv1.MessageSchema, m as JsonValue).parts, `message[${i}].parts`, maxParts));
  artifacts.forEach((a, i) => validateParts(fromJson(messagingv1.ArtifactSchema, a as JsonValue).parts, `artifacts[${i}].parts`, maxParts));
}

/** An answer the hub will not store: the task fails with a message of the hub's own, never the agent's text. */
const isRefusedAnswer = (err: unknown) => err instanceof HubError && (err.reason === Reason.INVALID_PARAMS || err.reason === Reason.LIMIT_EXCEEDED);

export class PushRelay {
  constructor(
    private readonly env: MessagingEnv,
    /** The worker's own calls: no caller is behind them. */
    private readonly ctx: CallContext,
    private readonly log: Logger,
  ) {}

  /**
   * Moves the hub task to what the agent answered: a bare message completes it; a task gives its
   * state, its agent messages and artifacts not relayed yet, and is followed up while it works
   * (`followDelayMs`: the wait before this answer, 0 for the first). `unrecorded`: the hub knew no
   * agent task before this answer, so a hub cancel meanwhile could not be forwarded and is to be
   * forwarded now; otherwise CancelTask requested it itself, and asking again would send the agent
   * a second cancel. `task` as the worker last read it.
   */
  async relay(
    agentId: string,
    task: PushTaskView,
    answer: A2AMessage | A2ATask,
    followDelayMs: number,
    unrecorded: boolean,
    maxBackoffMs: number,
  ): Promise<{ applied: Applied; next: Next }> {
    if (!FINAL.has(task.state) && !(await this.granted(task))) {
      // What the agent said after the grant went is not relayed; its own task is canceled.
      const applied = await this.fail(task.id, GRANT_REVOKED_TEXT);
      if ('messageId' in answer) return { applied, next: { kind: 'none' } };
      await this.env.pushes.savePushTask(detachedSignal(), task.id, agentId, answer.id, null, 0);
      await this.env.pushes.requestPushCancel(detachedSignal(), task.id);
      return { applied, next: { kind: 'cancel' } };
    }
    if ('messageId' in answer) return { applied: await this.apply(task.id, 'completed', [fromA2AMessage(answer)], []), next: { kind: 'none' } };
    const state = stateFromAgent(answer.status?.state ?? TaskState.TASK_STATE_UNSPECIFIED);
    const said = [...answer.history, ...(answer.status?.message ? [answer.status.message] : [])].filter((m) => m.role === Role.ROLE_AGENT);
    const applied = await this.apply(task.id, state, said.map(fromA2AMessage), answer.artifacts.filter((a) => a.parts.length).map(fromA2AArtifact));
    const settled = isSettled(state);
    // A task the agent finished at its first answer, which ended the hub task: nothing will ask
    // for the agent's task (no continuation, no cancel), so it is not recorded.
    if (settled && unrecorded && applied.ended) return { applied, next: { kind: 'none' } };
    const delay = settled ? 0 : nextDelay(followDelayMs, maxBackoffMs);
    await this.env.pushes.savePushTask(detachedSignal(), task.id, agentId, answer.id, settled ? null : Date.now() + delay, delay);
    if (settled) return { applied, next: { kind: 'none' } };
    if (applied.state && FINAL.has(applied.state) && unrecorded) {
      // The hub task ended (canceled, expired) while the agent took the message: tell the agent.
      await this.env.pushes.requestPushCancel(detachedSignal(), task.id);
      return { applied, next: { kind: 'cancel' } };
    }
    return { applied, next: { kind: 'follow-up', inMs: delay } };
  }

  /**
   * Across tenants, whether the grant that let the sender reach the agent still holds: asked of
   * identity every time (never cached), as for a connected recipient's UpdateTask.
   */
  async granted(task: PushTaskView): Promise<boolean> {
    const agent = await this.env.recipients.get(task.recipientAgentId, this.ctx);
    if (!agent || agent.tenantId === task.senderTenantId) return true;
    const grant = await this.env.identity.checkGrant({ agentId: task.senderAgentId, otherAgentId: agent.id }, { parent: this.ctx });
    return grant.approved;
  }

  async fail(taskId: string, text: string): Promise<Applied> {
    return this.apply(taskId, 'failed', [agentText(newId('msg'), text)], []);
  }

  /**
   * One transition of the hub task: the state and the messages and artifacts (hub proto JSON) it
   * does not hold yet, by id, so a repeated look at the agent's task adds nothing. A finished hub
   * task stays as it is.
   */
  private async apply(taskId: string, state: StateName, messages: unknown[], artifacts: unknown[]): Promise<Applied> {
    const now = this.env.now();
    // A blocking send of this process waiting on the task answers with the record the settling
    // transition returns (SettledHandoff) instead of reading the task back: that one is loaded whole.
    const handOver = isSettled(state) && this.env.settled.awaited(taskId);
    const load = handOver ? { artifacts: true } : { historyLength: 0, artifacts: false };
    let moved: Awaited<ReturnType<MessagingEnv['tasks']['transition']>>;
    try {
      validateAnswer(messages, artifacts, this.env.limits.maxParts);
      moved = await this.env.tasks.transition(
        detachedSignal(),
        taskId,
        (t, held) => {
          if (FINAL.has(t.state)) return { next: t };
          const newMessages = unseen(messages, held!.messages, 'messageId');
          const newArtifacts = unseen(artifacts, held!.artifacts, 'id');
          if (state === t.state && !newMessages.length && !newArtifacts.length) return { next: t };
          // As with UpdateTask, a finished task takes its queued deliveries with it, in the same commit.
          return { next: { state, updatedAt: now }, append: { messages: newMessages, artifacts: newArtifacts }, purge: FINAL.has(state) };
        },
        { held: true, check: taskGrowthCheck(this.env.limits), load },
      );
    } catch (err) {
      if (!isRefusedAnswer(err)) throw err;
      this.log.info({ task_id: taskId, reason: (err as HubError).message }, 'push agent answer not accepted');
      const text = `The agent's answer was not accepted: ${(err as HubError).message}`;
      moved = await this.env.tasks.transition(
        detachedSignal(),
        taskId,
        (t) => (FINAL.has(t.state) ? { next: t } : { next: { state: 'failed', updatedAt: now }, append: { messages: [agentText(newId('msg'), text)] }, purge: true }),
        { load },
      );
    }
    if (!moved) return { state: undefined, ended: false };
    if (handOver) this.env.settled.offer(moved.after);
    if (moved.after.version !== moved.before.version) await announce(this.env, moved.after, this.ctx);
    return { state: moved.after.state, ended: !FINAL.has(moved.before.state) && FINAL.has(moved.after.state) };
  }
}

/** First follow-up of a task the agent accepted but had not finished; each next one doubles. */
const FIRST_FOLLOW_UP_MS = 10;

/**
 * The wait before asking about a working task again, after one that lasted `previousMs` (0: the
 * first). The first is short: most agents finish at once, and accepted with returnImmediately
 * their answer is still `submitted`; waiting a whole backoff step there made every exchange slow.
 */
export function nextDelay(previousMs: number, maxMs: number): number {
  return Math.min(previousMs ? previousMs * 2 : FIRST_FOLLOW_UP_MS, maxMs);
}
