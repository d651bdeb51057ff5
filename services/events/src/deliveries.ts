import { randomUUID } from 'node:crypto';
import { eventsv1 } from '@agenthub/proto';
import { HubError, type CallContext } from '@agenthub/runtime';
import type { EventsEnv } from './env.js';
import { retryAfterMs, type AttemptResult } from './send.js';
import { webhookHeaders } from './signing.js';
import type { DeliveryStatusText, DueDelivery, Outcome } from './store.js';
import * as validate from './validate.js';
import { adminWebhook } from './webhooks.js';

const { DeliveryStatus } = eventsv1;

/** A message as the bus hands it over (structurally the runtime's ConsumedMessage). */
export interface EventMessage {
  key: string;
  value: string;
  headers: Record<string, string>;
}

/**
 * Turns one workspace event into a delivery row per matching webhook, idempotently, and wakes
 * the worker. It resolves only once the rows are committed, so the bus commits the offset after
 * them: a crash in between makes the event come again, and the unique (webhook, event) adds
 * nothing twice. A message that is not a well-formed event is logged and skipped rather than
 * holding up every later event of its workspace.
 */
export async function intakeEvent(env: EventsEnv, message: EventMessage): Promise<void> {
  const eventId = message.headers['event-id'];
  let type: unknown;
  let workspaceId: unknown;
  let occurredAt: number | undefined;
  try {
    const payload = JSON.parse(message.value) as { event?: unknown; timestamp?: unknown; data?: { workspace_id?: unknown } };
    type = payload.event;
    workspaceId = payload.data?.workspace_id ?? message.key;
    const at = typeof payload.timestamp === 'string' ? Date.parse(payload.timestamp) : NaN;
    occurredAt = Number.isNaN(at) ? undefined : at;
  } catch {
    type = undefined;
  }
  if (!eventId || typeof type !== 'string' || typeof workspaceId !== 'string') {
    env.log.error({ key: message.key, event_id: eventId }, 'skipped a bus message that is not a workspace event');
    return;
  }
  const queued = await env.store.intake({ workspaceId, eventId, type, payload: message.value, occurredAt }, env.clock());
  if (queued > 0) {
    env.log.debug({ event_id: eventId, event: type, workspace_id: workspaceId, deliveries: queued }, 'event queued for webhooks');
    env.wake();
  }
}

/** The retry decision after an attempt; `failures` counts the delivery's failed attempts before this one. */
export function decide(env: EventsEnv, result: AttemptResult, failures: number, failingSince: number | undefined, now: number): Outcome {
  if (!result.error) return { kind: 'delivered' };
  if (result.statusCode === 410) return { kind: 'disable', reason: 'gone' };
  if (failingSince !== undefined && now - failingSince >= env.limits.disableAfterMs) return { kind: 'disable', reason: 'failing' };
  const step = env.limits.retryScheduleMs[failures];
  if (step === undefined) return { kind: 'failed' };
  // Retry-After may push the next attempt later than the schedule says, never earlier, and
  // never past the longest honoured wait.
  const asked = retryAfterMs(result.retryAfter, now);
  const delay = asked === undefined ? step : Math.max(step, Math.min(asked, env.limits.maxRetryAfterMs));
  return { kind: 'retry', at: now + delay };
}

async function attempt(env: EventsEnv, target: { url: string; secrets: string[]; eventId: string; payload: string }, signal?: AbortSignal) {
  const at = env.clock();
  const timestamp = Math.floor(at / 1000);
  const headers = webhookHeaders(target.secrets, target.eventId, timestamp, target.payload);
  const result = await env.sender.post(target.url, headers, target.payload, signal);
  env.metrics.attemptSeconds.observe({ result: result.error ? 'failure' : 'success' }, result.latencyMs / 1000);
  return { at, result };
}

/** Sends one claimed delivery and records the attempt and what follows from it. */
async function deliverOne(env: EventsEnv, delivery: DueDelivery, signal: AbortSignal): Promise<void> {
  const { at, result } = await attempt(env, delivery, signal);
  // Cut short by shutdown: not the endpoint's fault, so no attempt is recorded; the delivery is
  // given back for the next worker (had this failed, the lease would lapse instead).
  if (signal.aborted) {
    await env.store.releaseLease(delivery.seq);
    return;
  }
  const outcome = await env.store.recordAttempt(
    delivery,
    { at, statusCode: result.statusCode, latencyMs: result.latencyMs, error: result.error },
    (failingSince) => decide(env, result, delivery.failures, failingSince, env.clock()),
  );
  if (!outcome) return;
  env.metrics.deliveries.inc({ outcome: outcome.kind === 'disable' ? 'disabled' : outcome.kind });
  const fields = { webhook_id: delivery.webhookId, event_id: delivery.eventId, status_code: result.statusCode, latency_ms: result.latencyMs };
  if (outcome.kind === 'disable') env.log.warn({ ...fields, error: result.error, reason: outcome.reason }, 'webhook endpoint disabled');
  else if (outcome.kind === 'failed') env.log.warn({ ...fields, error: result.error }, 'webhook delivery failed for good');
  else if (outcome.kind === 'retry') env.log.debug({ ...fields, error: result.error, next_attempt_at: outcome.at }, 'webhook attempt failed');
}

/**
 * The delivery loop. Each pass claims due deliveries (the head of each webhook's queue, with a
 * lease, FOR UPDATE SKIP LOCKED, so replicas share the work), sends them concurrently, and goes
 * on while anything was due; then it sleeps until the next one falls due, at most `pollMs`, or
 * until woken.
 */
export class DeliveryWorker {
  private running = false;
  private loop: Promise<void> | undefined;
  private wakeUp: (() => void) | undefined;
  private woken = false;
  private readonly stopping = new AbortController();

  constructor(
    private readonly env: EventsEnv,
    private readonly options: { pollMs: number; batchSize: number; leaseMs: number },
  ) {}

  start(): void {
    this.running = true;
    this.loop = this.run();
  }

  wake(): void {
    this.woken = true;
    this.wakeUp?.();
  }

  /** Sends everything due now, pass after pass; resolves with the number of attempts made. */
  async deliverDue(): Promise<number> {
    let attempts = 0;
    for (;;) {
      if (this.stopping.signal.aborted) return attempts;
      const due = await this.env.store.claimDue(this.env.clock(), this.options.batchSize, this.options.leaseMs);
      if (due.length === 0) {
        await this.env.store.sweepRetired();
        return attempts;
      }
      attempts += due.length;
      await Promise.all(
        due.map((delivery) =>
          deliverOne(this.env, delivery, this.stopping.signal).catch((err: unknown) => {
            this.env.log.error({ err, webhook_id: delivery.webhookId, event_id: delivery.eventId }, 'could not record a webhook attempt');
          }),
        ),
      );
    }
  }

  private async run(): Promise<void> {
    while (this.running) {
      this.woken = false;
      let sleepMs = this.options.pollMs;
      try {
        await this.deliverDue();
        const next = await this.env.store.nextDue();
        if (next !== undefined) sleepMs = Math.min(sleepMs, Math.max(0, next - this.env.clock()));
      } catch (err) {
        if (this.running) this.env.log.error({ err }, 'webhook delivery pass failed');
      }
      if (!this.running || this.woken) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.max(sleepMs, 10));
        this.wakeUp = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wakeUp = undefined;
    }
  }

  /** Stops the loop; attempts in flight are aborted (their leases lapse and another pass retries them). */
  async stop(): Promise<void> {
    this.running = false;
    this.stopping.abort();
    this.wakeUp?.();
    await this.loop;
  }
}

/** Admin. One `webhook.test` event sent now, outside the queue and the retry schedule. */
export async function testWebhook(env: EventsEnv, ctx: CallContext, request: eventsv1.TestWebhookRequest) {
  const webhook = await adminWebhook(env, ctx, request);
  const eventId = `evt_${randomUUID()}`;
  const payload = JSON.stringify({
    event: 'webhook.test',
    timestamp: new Date(env.clock()).toISOString(),
    data: { workspace_id: webhook.workspaceId, webhook_id: webhook.id },
  });
  const secrets = await env.store.signingSecrets(webhook.id, env.clock());
  const { at, result } = await attempt(env, { url: webhook.url, secrets, eventId, payload }, ctx.signal);
  await env.store.recordTest({
    webhookId: webhook.id,
    eventId,
    type: 'webhook.test',
    payload,
    attempt: { at, statusCode: result.statusCode, latencyMs: result.latencyMs, error: result.error },
  });
  env.metrics.deliveries.inc({ outcome: 'test' });
  return {
    delivery: { eventId, statusCode: result.statusCode, latencyMs: result.latencyMs, error: result.error, delivered: !result.error },
  };
}

const STATUS_TEXT: Record<number, DeliveryStatusText | undefined> = {
  [DeliveryStatus.PENDING]: 'pending',
  [DeliveryStatus.DELIVERED]: 'delivered',
  [DeliveryStatus.FAILED]: 'failed',
};

const STATUS_ENUM: Record<DeliveryStatusText, eventsv1.DeliveryStatus> = {
  pending: DeliveryStatus.PENDING,
  delivered: DeliveryStatus.DELIVERED,
  failed: DeliveryStatus.FAILED,
};

export async function listDeliveries(env: EventsEnv, ctx: CallContext, request: eventsv1.ListDeliveriesRequest) {
  const limit = validate.limit(request.limit);
  const status = STATUS_TEXT[request.status];
  const webhook = await adminWebhook(env, ctx, request);
  const deliveries = await env.store.listDeliveries(webhook.id, limit, status);
  return {
    deliveries: deliveries.map((d) => ({
      eventId: d.eventId,
      event: d.event,
      status: STATUS_ENUM[d.status],
      attempts: d.attempts.map((a) => ({ at: BigInt(a.at), statusCode: a.statusCode, latencyMs: a.latencyMs, error: a.error })),
      nextAttemptAt: BigInt(d.nextAttemptAt),
      createdAt: BigInt(d.createdAt),
    })),
  };
}

export async function replayDeliveries(env: EventsEnv, ctx: CallContext, request: eventsv1.ReplayDeliveriesRequest) {
  const target = request.target;
  if (target.case === undefined) throw HubError.invalidParams('event_id', 'or since is required');
  if (target.case === 'eventId' && target.value.length === 0) throw HubError.invalidParams('event_id', 'is required');
  const webhook = await adminWebhook(env, ctx, request);
  const replayed = await env.store.replay(
    webhook.id,
    target.case === 'eventId' ? { eventId: target.value } : { since: Number(target.value) },
    env.clock(),
  );
  if (replayed === undefined) throw HubError.notFound('Delivery not found');
  if (replayed > 0) {
    ctx.log.info({ workspace_id: webhook.workspaceId, webhook_id: webhook.id, replayed }, 'webhook deliveries queued again');
    env.wake();
  }
  return { replayed };
}
