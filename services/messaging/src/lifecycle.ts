import type { Logger } from '@agenthub/runtime';
import { isSettled } from '@agenthub/tasks';
import type { MessagingEnv } from './env.js';
import type { StateName, TaskRecord } from './store.js';
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
    await env.kv.publish(taskChannel(task.id), task.state);
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
 * Waits until the task reaches a terminal or input-required state, or `ms` pass. The
 * unsubscribe is not awaited: the answer does not depend on it.
 */
export async function waitForSettled(env: MessagingEnv, taskId: string, ms: number, listening: Promise<Listener>): Promise<void> {
  const listener = await listening;
  try {
    const task = await env.store.getTask(taskId, false);
    if (!task || settled(task.state)) return;
    await listener.wait(ms);
  } finally {
    void listener.close();
  }
}
