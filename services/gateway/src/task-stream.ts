import { create } from '@bufbuild/protobuf';
import { messagingv1 } from '@agenthub/proto';

/**
 * The stream of a task just sent: the task as the send answered it, then the transitions after
 * that version (watch it with `afterVersion: task.version`). Watching the task as it stands when
 * the watch begins would fold a quick recipient's updates into that first snapshot, and the
 * client would see only a finished task, none of its updates.
 */
export async function* sentTaskStream(
  task: messagingv1.Task,
  transitions: AsyncIterable<messagingv1.WatchTaskResponse>,
): AsyncGenerator<messagingv1.WatchTaskResponse> {
  yield create(messagingv1.WatchTaskResponseSchema, { event: { case: 'task', value: task } });
  yield* transitions;
}
