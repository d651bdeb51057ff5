import { fromJson } from '@bufbuild/protobuf';
import { messagingv1 } from '@agenthub/proto';
import { detachedSignal, HubError, waitSignal, type CallContext, type Caller, type Logger } from '@agenthub/runtime';
import type { DeliveryRecord } from './delivery-store.js';
import { inboxChannel, onlineKey, type MessagingEnv } from './env.js';
import { announce } from './lifecycle.js';
import { listen } from './wake.js';

const DEFAULT_MAX = 10;
const MAX_MAX = 100;

function deliveryView(d: DeliveryRecord): messagingv1.Delivery {
  return {
    $typeName: 'agenthub.messaging.v1.Delivery',
    id: d.id,
    taskId: d.taskId,
    contextId: d.contextId,
    senderAgentId: d.senderAgentId,
    message: fromJson(messagingv1.MessageSchema, d.message as never),
    createdAt: BigInt(d.createdAt),
    attempt: d.attempts,
  };
}

/**
 * An inbox stream with nothing to send claims again this often, so a lost pub/sub message (Redis
 * restart, replica failover) or a claim that expired delays a delivery instead of stalling it.
 */
const STREAM_RESCAN_MS = 5_000;
/** An open inbox stream renews the caller's presence this often. */
const STREAM_PRESENCE_MS = 25_000;

function batchSize(max: number): number {
  if (max < 0 || max > MAX_MAX) throw HubError.invalidParams('max', `must be between 1 and ${MAX_MAX}`);
  return max || DEFAULT_MAX;
}

/**
 * Claims up to `max` of the caller's queued deliveries. A call whose caller is gone claims
 * nothing, and what it claimed while the caller left is released at once: the next call gets it
 * now, not after the claim window as attempt 2.
 */
async function claim(env: MessagingEnv, ctx: CallContext, caller: Caller, max: number): Promise<DeliveryRecord[]> {
  if (ctx.signal.aborted) return [];
  const now = env.now();
  const claimed = await env.deliveries.claimDeliveries(ctx.signal, caller.agentId, now, now + env.limits.claimMs, max);
  if (ctx.signal.aborted && claimed.length) {
    await release(env, caller, claimed);
    return [];
  }
  return claimed;
}

function release(env: MessagingEnv, caller: Caller, deliveries: DeliveryRecord[]): Promise<unknown> {
  return env.deliveries.releaseClaims(detachedSignal(), caller.agentId, deliveries.map((d) => d.id));
}

/**
 * Marks the caller online, then claims its queued deliveries; with none, waits (up to `wait_ms`,
 * bounded) for a send to wake it through Kv pub/sub, on whichever replica the send ran.
 */
export async function pollInbox(env: MessagingEnv, ctx: CallContext, caller: Caller, request: messagingv1.PollInboxRequest) {
  if (request.waitMs < 0) throw HubError.invalidParams('wait_ms', 'must be at least 0');
  const max = batchSize(request.max);
  const waitMs = Math.min(request.waitMs, env.limits.maxPollWaitMs);
  // Not the caller's signal: a poll whose caller left still answers (with nothing claimed).
  await env.kv.set(onlineKey(caller.agentId), '1', env.limits.onlineMs + waitMs);
  let deliveries = await claim(env, ctx, caller, max);
  if (!deliveries.length && waitMs > 0) {
    const stop = waitSignal(ctx);
    const listener = await listen(env.kv, inboxChannel(caller.agentId), stop);
    try {
      // A send between the first claim and the subscription is caught by claiming once more.
      deliveries = await claim(env, ctx, caller, max);
      if (!deliveries.length && !stop.aborted) {
        await listener.wait(waitMs);
        deliveries = await claim(env, ctx, caller, max);
      }
    } finally {
      // Neither is awaited: the answer does not depend on them, and they are a round trip each.
      void listener.close();
    }
    void env.kv.set(onlineKey(caller.agentId), '1', env.limits.onlineMs).catch(() => undefined);
  }
  return { deliveries: deliveries.map(deliveryView) };
}

/**
 * The caller's deliveries as sends queue them, for as long as the stream is open (until the
 * service drains). Unlike back-to-back polls it subscribes once, renews presence only when due,
 * and claims again only when woken, when its last batch was full, or on the rescan.
 */
export async function* streamInbox(
  env: MessagingEnv,
  ctx: CallContext,
  caller: Caller,
  request: messagingv1.StreamInboxRequest,
): AsyncGenerator<messagingv1.StreamInboxResponse> {
  const max = batchSize(request.max);
  const stop = waitSignal(ctx);
  const renew = async () => {
    await env.kv.set(onlineKey(caller.agentId), '1', env.limits.onlineMs + STREAM_PRESENCE_MS);
    return performance.now() + STREAM_PRESENCE_MS;
  };
  let renewAt = await renew();
  const listener = await listen(env.kv, inboxChannel(caller.agentId), stop);
  // Claimed and handed to the stream, but not yet taken by it (the generator resumes only once
  // its batch is written): released at once if the stream ends there.
  let unsent: DeliveryRecord[] = [];
  try {
    while (!stop.aborted) {
      if (performance.now() >= renewAt) renewAt = await renew();
      // A wake-up from now on may announce a delivery this claim misses: the wait below sees it.
      listener.reset();
      unsent = await claim(env, ctx, caller, max);
      if (unsent.length) {
        yield { $typeName: 'agenthub.messaging.v1.StreamInboxResponse', deliveries: unsent.map(deliveryView) };
        const full = unsent.length === max;
        unsent = [];
        if (full) continue;
      }
      await listener.wait(Math.min(STREAM_RESCAN_MS, Math.max(0, renewAt - performance.now())));
    }
  } finally {
    if (unsent.length) void release(env, caller, unsent).catch(() => undefined);
    void env.kv.set(onlineKey(caller.agentId), '1', env.limits.onlineMs).catch(() => undefined);
    await listener.close();
  }
}

export async function ackDelivery(env: MessagingEnv, ctx: CallContext, caller: Caller, request: messagingv1.AckDeliveryRequest) {
  if (!request.deliveryId) throw HubError.invalidParams('delivery_id', 'is required');
  return { acked: await env.deliveries.ackDelivery(ctx.signal, caller.agentId, request.deliveryId) };
}

/**
 * Fails the still-submitted tasks whose deliveries expired (x-ttl) and drops expired deliveries
 * of tasks that moved on. Returns how many tasks it failed. `signal` is the sweeper's stop
 * (without one, as in tests, the pass is not cut short).
 */
export async function sweepExpired(env: MessagingEnv, log: Logger, batch = 100, signal: AbortSignal = new AbortController().signal): Promise<number> {
  const now = env.now();
  let failed = 0;
  for (const taskId of await env.deliveries.expiredTaskIds(signal, now, batch)) {
    const moved = await env.tasks.transition(signal, taskId, (t) =>
      t.state === 'submitted' ? { next: { state: 'failed', updatedAt: now }, purge: true } : { next: t },
    );
    if (moved?.after.state === 'failed' && moved.before.state === 'submitted') {
      failed += 1;
      await announce(env, moved.after, { log });
    } else {
      await env.deliveries.deleteExpired(signal, taskId, now);
    }
  }
  await env.sendKeys.prune(signal, now - env.limits.idempotencyWindowMs, batch);
  return failed;
}

/** Runs the sweeper every `intervalMs` until stopped. */
export function startSweeper(env: MessagingEnv, log: Logger, intervalMs: number): () => Promise<void> {
  let running: Promise<unknown> = Promise.resolve();
  const stopping = new AbortController();
  const timer = setInterval(() => {
    running = running
      .then(() => sweepExpired(env, log, undefined, stopping.signal))
      .catch((err) => {
        // A sweep cut short by stopping is not a failure: the next process sweeps again.
        if (!stopping.signal.aborted) log.error({ err }, 'sweeping expired deliveries failed');
      });
  }, intervalMs);
  timer.unref();
  return async () => {
    clearInterval(timer);
    stopping.abort();
    await running;
  };
}
