import { fromJson } from '@bufbuild/protobuf';
import { messagingv1 } from '@agenthub/proto';
import { HubError, waitSignal, type CallContext, type Caller } from '@agenthub/runtime';
import { FINAL, stateOfWord } from '@agenthub/tasks';
import type { TransitionRecord } from './task-store.js';
import type { MessagingEnv } from './env.js';
import { taskChannel } from './lifecycle.js';
import { listen } from './wake.js';
import { taskView, visibleTask } from './tasks.js';

/**
 * A watcher re-reads transitions when the Kv channel announces one, and also this often, so a
 * lost pub/sub message (Redis restart, replica failover) delays a stream instead of stalling it.
 */
const RESCAN_MS = 5_000;

function transitionView(t: TransitionRecord, contextId: string): messagingv1.WatchTaskResponse {
  const last = t.messages.at(-1);
  return {
    $typeName: 'agenthub.messaging.v1.WatchTaskResponse',
    event: {
      case: 'transition',
      value: {
        $typeName: 'agenthub.messaging.v1.TaskTransition',
        taskId: t.taskId,
        contextId,
        version: BigInt(t.version),
        state: stateOfWord(t.state)!,
        updatedAt: BigInt(t.updatedAt),
        message: last === undefined ? undefined : fromJson(messagingv1.MessageSchema, last as never),
        artifacts: t.artifacts.map((a) => fromJson(messagingv1.ArtifactSchema, a as never)),
        final: FINAL.has(t.state),
      },
    },
  };
}

/**
 * The task (unless resuming after a version), then each later transition in version order,
 * ending after a terminal one or when the caller goes away. Transitions are read from the
 * database, so whichever replica made them, and however long the watcher was gone, none is lost.
 */
export async function* watchTask(
  env: MessagingEnv,
  ctx: CallContext,
  caller: Caller,
  request: messagingv1.WatchTaskRequest,
): AsyncGenerator<messagingv1.WatchTaskResponse> {
  if (request.historyLength !== undefined && request.historyLength < 0) throw HubError.invalidParams('historyLength', 'must be at least 0');
  if (request.afterVersion !== undefined && request.afterVersion < 0n) throw HubError.invalidParams('afterVersion', 'must be at least 0');
  const stop = waitSignal(ctx);
  const listener = await listen(env.kv, taskChannel(request.taskId), stop);
  try {
    const task = await visibleTask(env, ctx.signal, caller, request.taskId, { historyLength: request.historyLength, artifacts: true });
    let version: number;
    if (request.afterVersion === undefined) {
      yield { $typeName: 'agenthub.messaging.v1.WatchTaskResponse', event: { case: 'task', value: taskView(task, request.historyLength) } };
      if (FINAL.has(task.state)) return;
      version = task.version;
    } else {
      version = Number(request.afterVersion);
    }
    while (!stop.aborted) {
      listener.reset();
      const transitions = await env.tasks.transitionsAfter(ctx.signal, task.id, version);
      for (const transition of transitions) {
        yield transitionView(transition, task.contextId);
        version = transition.version;
        if (FINAL.has(transition.state)) return;
      }
      if (transitions.length) continue;
      // Resuming after the final version: nothing more will come.
      const current = await env.tasks.getTask(ctx.signal, task.id, false);
      if (!current || (FINAL.has(current.state) && current.version <= version)) return;
      await listener.wait(RESCAN_MS);
    }
  } finally {
    await listener.close();
  }
}
