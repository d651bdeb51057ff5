import type { HubClient } from './client.js';
import { ErrorCode, HubRpcError } from './errors.js';
import type { ArtifactInput, Delivery, Message, Part } from './types.js';

/** One piece of work handed to a connected agent's handler. */
export interface Job {
  task: { id: string; contextId: string };
  /** The sender's agent id. */
  from: string;
  message: Message;
  /** The message's text parts, joined with newlines. */
  text: string;
  /** The message's `data` parts, parsed as JSON (unparseable ones are left out). */
  data: unknown[];
  delivery: Delivery;
  /** Aborted when serve() is stopped. */
  signal: AbortSignal;
  /** The client serve() runs on, for calls of the handler's own (memories, other agents). */
  client: HubClient;
}

/**
 * What the handler answers; the task moves accordingly:
 * `{text}` / `{parts}` → completed with one artifact holding them; `{artifacts, text?}` → completed
 * with those artifacts (and `text` as the agent's message); `{inputRequired}` → input-required, the
 * question as the agent's message; `{failed}` / `{rejected}` → that state with the reason as message.
 * A handler that throws fails the task with a generic message (the error goes to `onError`, not to
 * the sender).
 */
export type Reply =
  | { text: string }
  | { parts: Part[] }
  | { artifacts: ArtifactInput[]; text?: string }
  | { inputRequired: string }
  | { failed: string }
  | { rejected: string };

export type Handler = (job: Job) => Reply | Promise<Reply>;

export interface ServeOptions {
  /** Stops serving: the inbox stream closes; running handlers see `job.signal` aborted. */
  signal?: AbortSignal;
  /** Deliveries handled at once (default 1). */
  concurrency?: number;
  /** Failures that serve() survives: a handler's throw, a lost connection before reconnecting. */
  onError?: (err: unknown, delivery?: Delivery) => void;
  /** Longest wait between two reconnects (default 30 s). */
  maxBackoffMs?: number;
}

const agentMessage = (text: string): Message => ({ role: 'agent', parts: [{ kind: 'text', text }] });


function updateOf(reply: Reply): { state: 'completed' | 'input-required' | 'failed' | 'rejected'; message?: Message; artifacts?: ArtifactInput[] } {
  if ('inputRequired' in reply) return { state: 'input-required', message: agentMessage(reply.inputRequired) };
  if ('failed' in reply) return { state: 'failed', message: agentMessage(reply.failed) };
  if ('rejected' in reply) return { state: 'rejected', message: agentMessage(reply.rejected) };
  if ('artifacts' in reply) return { state: 'completed', artifacts: reply.artifacts, ...(reply.text ? { message: agentMessage(reply.text) } : {}) };
  const parts: Part[] = 'parts' in reply ? reply.parts : [{ kind: 'text', text: reply.text }];
  return { state: 'completed', artifacts: [{ name: 'response', parts }] };
}

/** The task is gone or already finished (a redelivery after it was answered, or a cancel). */
const settled = (err: unknown) => err instanceof HubRpcError && (err.code === ErrorCode.TASK_NOT_FOUND || err.code === ErrorCode.INVALID_OPERATION);

/**
 * Runs a connected agent: holds its inbox stream (reconnecting with backoff), hands each delivery
 * to `handler`, moves the task (`working`, then the state of the reply) and acknowledges the
 * delivery once the task moved. A delivery whose task already finished is acknowledged and
 * skipped, so redeliveries (at-least-once) are harmless. Resolves when `options.signal` aborts;
 * rejects only when the API key is refused.
 */
export async function serve(client: HubClient, handler: Handler, options: ServeOptions = {}): Promise<void> {
  const stop = options.signal ?? new AbortController().signal;
  const concurrency = Math.max(1, options.concurrency ?? 1);
  const maxBackoffMs = options.maxBackoffMs ?? 30_000;
  const running = new Map<string, Promise<void>>();
  const report = options.onError ?? ((err: unknown) => console.error('agenthub serve:', err));

  const handle = async (delivery: Delivery) => {
    const taskId = delivery.task_id;
    const ack = () => client.call('x-hub/inbox.ack', { delivery_id: delivery.delivery_id });
    try {
      await client.call('x-hub/tasks.update', { task_id: taskId, state: 'working' });
    } catch (err) {
      if (!settled(err)) throw err;
      await ack();
      return;
    }
    const message = delivery.message ?? { role: 'user', parts: [] };
    let update: ReturnType<typeof updateOf>;
    try {
      update = updateOf(
        await handler({
          task: { id: taskId, contextId: delivery.context_id },
          from: delivery.from_agent_id,
          message,
          text: message.parts.flatMap((p) => (p.kind === 'text' ? [p.text] : [])).join('\n'),
          data: message.parts.flatMap((p) => (p.kind === 'data' ? parseJson(p.data) : [])),
          delivery,
          signal: stop,
          client,
        }),
      );
    } catch (err) {
      report(err, delivery);
      update = { state: 'failed', message: agentMessage('The agent failed to handle this message.') };
    }
    try {
      await client.call('x-hub/tasks.update', { task_id: taskId, ...update });
    } catch (err) {
      if (!settled(err)) throw err;
    }
    await ack();
  };

  let failures = 0;
  while (!stop.aborted) {
    try {
      for await (const { result: delivery } of client.stream('x-hub/inbox.stream', { max: concurrency }, { signal: stop })) {
        failures = 0;
        if (running.has(delivery.delivery_id)) continue;
        const done = handle(delivery)
          .catch((err: unknown) => report(err, delivery))
          .finally(() => running.delete(delivery.delivery_id));
        running.set(delivery.delivery_id, done);
        if (running.size >= concurrency) await Promise.race(running.values());
      }
    } catch (err) {
      if (stop.aborted) break;
      if (err instanceof HubRpcError && err.code === ErrorCode.UNAUTHENTICATED) throw err;
      report(err);
    }
    failures += 1;
    const backoff = Math.min(maxBackoffMs, 500 * 2 ** Math.min(failures - 1, 10));
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, backoff / 2 + Math.random() * (backoff / 2));
      stop.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
    });
  }
  await Promise.allSettled(running.values());
}

function parseJson(text: string): unknown[] {
  try {
    return [JSON.parse(text)];
  } catch {
    return [];
  }
}
