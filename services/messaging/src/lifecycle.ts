import { detachedSignal, type Logger } from '@agenthub/runtime';
import { isSettled } from '@agenthub/tasks';
import type { MessagingEnv } from './env.js';
import type { StateName, TaskRecord } from './task-store.js';
import { listen, type Listener } from './wake.js';

/**
 * How a task's state changes are heard: each is announced, after its transition committed, on
 * the task's Kv channel, whoever made it (a call, the push worker, the x-ttl sweeper); blocking
 * sends and task streams on every replica listen there. An announcement is a hint: listeners
 * read the task itself from the store, so a lost one delays them and misleads no one.
 */

/** Kv channel announcing a task's transitions (its new state), heard on every replica. */
export const taskChannel = (taskId: string) => `messaging:task:${taskId}`;

/** Announces the task's new state; best effort (a failure is logged, never thrown). */
export async function announce(env: Pick<MessagingEnv, 'kv'>, task: Pick<TaskRecord, 'id' | 'state'>, ctx: { log: Logger }): Promise<void> {
  try {
    // The transition is committed: those waiting on the task hear of it even if this caller left.
    await env.kv.publish(taskChannel(task.id), task.state, detachedSignal());
  } catch (err) {
    ctx.log.warn({ err, task_id: task.id }, 'could not announce a task transition');
  }
}

const settled = (state: string) => isSettled(state as StateName);

/** Listens for the task's settling transitions; subscribe before the state it guards is read. */
export function listenForSettled(env: MessagingEnv, taskId: string, signal: AbortSignal): Promise<Listener> {
  return listen(env.kv, taskChannel(taskId), signal, settled);
}

/**
 * Hands a task, as the update that settled it committed it, to a blocking send of this process
 * waiting on it, which then answers without reading the task back (two queries on its path).
 * Only records holding every message and artifact are offered.
 */
export class SettledHandoff {
  private readonly waiting = new Map<string, TaskRecord | undefined>();

  /** The caller is about to wait on the task; `take` returns what was offered since. */
  expect(taskId: string): void {
    this.waiting.set(taskId, undefined);
  }

  /** Whether a blocking send of this process waits on the task: an update settling it then loads it whole, to offer it. */
  awaited(taskId: string): boolean {
    return this.waiting.has(taskId);
  }

  offer(task: TaskRecord): void {
    if (this.waiting.has(task.id) && settled(task.state)) this.waiting.set(task.id, task);
  }

  take(taskId: string): TaskRecord | undefined {
    const task = this.waiting.get(taskId);
    this.waiting.delete(taskId);
    return task;
  }
}

/**
 * Waits until the task reaches a terminal or input-required state, or `ms` pass. The task is read
 * first, in case it settled before the subscription began, unless `subscribedBeforeWrite`: then
 * every settling transition came after the subscription and is heard. The unsubscribe is not
 * awaited: the answer does not depend on it.
 */
export async function waitForSettled(
  env: MessagingEnv,
  signal: AbortSignal,
  taskId: string,
  ms: number,
  listening: Listener | Promise<Listener>,
  subscribedBeforeWrite = false,
): Promise<void> {
  const listener = await listening;
  try {
    if (!subscribedBeforeWrite) {
      const task = await env.tasks.getTask(signal, taskId, false);
      if (!task || settled(task.state)) return;
    }
    await listener.wait(ms);
  } finally {
    void listener.close();
  }
}
