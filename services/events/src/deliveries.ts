import { randomUUID } from 'node:crypto';
import { eventsv1 } from '@agenthub/proto';
import { contextOf, currentTraceparent, detachedSignal, HubError, SpanKind, TRACEPARENT, withSpan, type CallContext } from '@agenthub/runtime';
import { matchAgentWebhooks } from './agent-webhooks.js';
import { intakeTaskEvent, isTaskScope } from './task-push.js';
import type { EventsEnv } from './env.js';
import { retryAfterMs, type AttemptResult } from './send.js';
import { webhookHeaders } from './signing.js';
import type { DeliveryStatusText, DueDelivery, Outcome } from './delivery-store.js';
import * as validate from './validate.js';
import { adminWebhook } from './webhooks.js';

const { DeliveryStatus } = eventsv1;

/** Bound on taking in one event: past it the intake fails and the event comes again. */
const INTAKE_TIMEOUT_MS = 30_000;

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
export function intakeEvent(env: EventsEnv, message: EventMessage): Promise<void> {
  // A consumer span under the relay's publish span (in the trace of the call that wrote the event); its deliveries continue from it.
  const span = { kind: SpanKind.CONSUMER, parent: contextOf(message.headers[TRACEPARENT]), attributes: { 'messaging.operation.type': 'process', 'event.id': message.headers['event-id'] ?? '' } };
  return withSpan('event intake', span, () => intake(env, message, AbortSignal.timeout(INTAKE_TIMEOUT_MS)));
}

async function intake(env: EventsEnv, message: EventMessage, signal: AbortSignal): Promise<void> {
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
  const traceparent = currentTraceparent() ?? message.headers[TRACEPARENT];
  const event = { workspaceId, eventId, type, payload: message.value, occurredAt, traceparent };
  // Each group with the workspace its delivery slots count under: agent-wide webhooks under ''
  // (their own workspace), task push configs under none known here (each task's scope).
  const queued: { webhookIds: string[]; slotsOf?: string }[] = type.startsWith('messaging.')
    ? [{ webhookIds: await intakeTaskEvent(env, event, signal) }]
    : [
        { webhookIds: await env.deliveries.intake(signal, event, env.clock()), slotsOf: workspaceId },
        { webhookIds: await matchAgentWebhooks(env, event, signal), slotsOf: '' },
      ];
  const deliveries = queued.reduce((sum, group) => sum + group.webhookIds.length, 0);
  if (deliveries > 0) env.log.debug({ event_id: eventId, event: type, workspace_id: workspaceId, deliveries }, 'event queued for webhooks');
  for (const group of queued) if (group.webhookIds.length > 0) env.wake(group.webhookIds, group.slotsOf);
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

async function attempt(
  env: EventsEnv,
  target: { url: string; secrets: string[]; eventId: string; payload: string; headers?: Record<string, string>; traceparent?: string },
  signal?: AbortSignal,
) {
  // Each attempt is a span of the trace whose call wrote the event; the sender passes it on to the receiver.
  // HTTP client attributes without url.full: a receiver's URL may carry a token in its path or query.
  // An unparsable URL is the sender's to refuse (recorded as the attempt's error), not the span's.
  const url = URL.parse(target.url);
  const attributes = {
    'event.id': target.eventId,
    'http.request.method': 'POST',
    ...(url && { 'url.scheme': url.protocol.slice(0, -1), 'server.address': url.hostname, 'server.port': Number(url.port || (url.protocol === 'https:' ? 443 : 80)) }),
  };
  return withSpan('webhook delivery', { kind: SpanKind.CLIENT, parent: contextOf(target.traceparent), attributes }, async (span) => {
    const sent = await sendAttempt(env, target, signal);
    // 0: no response (refused, timed out, or an address the hub may not call).
    if (sent.result.statusCode > 0) span?.setAttribute('http.response.status_code', sent.result.statusCode);
    return sent;
  });
}

async function sendAttempt(env: EventsEnv, target: { url: string; secrets: string[]; eventId: string; payload: string; headers?: Record<string, string> }, signal?: AbortSignal) {
  const at = env.clock();
  const timestamp = Math.floor(at / 1000);
  const headers = { ...target.headers, ...webhookHeaders(target.secrets, target.eventId, timestamp, target.payload) };
  const result = await env.sender.post(target.url, headers, target.payload, signal);
  env.metrics.attemptSeconds.observe({ result: result.error ? 'failure' : 'success' }, result.latencyMs / 1000);
  return { at, result };
}

/** The attempt recorded for a delivery stopped because the webhook's creator lost admin access. */
export const CREATOR_ACCESS_ERROR = 'not sent: the agent that created the webhook no longer has admin access to the workspace';

/**
 * Whether the webhook's creator still may have the delivery sent. When it lost admin access
 * (removed, demoted, its grant revoked), the webhook is disabled (`creator_access`) with this
 * delivery's attempt recorded and its pending deliveries failed, as for any disabled endpoint.
 */
async function creatorMaySend(env: EventsEnv, delivery: DueDelivery, signal: AbortSignal): Promise<boolean> {
  // Only a webhook of one workspace is checked here: an agent-wide one ('') is matched against
  // its creator's admin role per event when the event is taken in (agent-webhooks.ts), and a task
  // push config is bound to a task its creator takes part in (task-push.ts).
  if (delivery.retired || delivery.workspaceId === '' || isTaskScope(delivery.workspaceId)) return true;
  const fields = { webhook_id: delivery.webhookId, event_id: delivery.eventId, created_by: delivery.createdBy };
  let admin: boolean;
  try {
    admin = await env.creatorAccess.isAdmin(delivery.workspaceId, delivery.createdBy, signal);
  } catch (err) {
    // Not known either way: the lease lapses and the delivery is tried again then.
    env.log.warn({ ...fields, err }, 'could not check the webhook creator\'s access; the delivery waits for its lease to lapse');
    return false;
  }
  if (admin) return true;
  const attempt = { at: env.clock(), statusCode: 0, latencyMs: 0, error: CREATOR_ACCESS_ERROR };
  const outcome = await env.deliveries.recordFailure(detachedSignal(), delivery, attempt, () => ({ kind: 'disable', reason: 'creator_access' }));
  if (outcome) {
    env.metrics.deliveries.inc({ outcome: 'disabled' });
    env.log.warn(fields, 'webhook disabled: its creator no longer has admin access to the workspace');
  }
  return false;
}

/**
 * Sends one claimed delivery and records the attempt and what follows from it. With `chain`, a
 * success also claims the webhook's next delivery (in the same statement), which is returned.
 * `delivered` when the success was recorded.
 */
async function deliverOne(
  env: EventsEnv,
  delivery: DueDelivery,
  signal: AbortSignal,
  chain: { leaseMs: number } | undefined,
): Promise<{ delivered: boolean; next: DueDelivery | undefined }> {
  if (!(await creatorMaySend(env, delivery, signal))) return { delivered: false, next: undefined };
  const { at, result } = await attempt(env, delivery, signal);
  // Cut short by shutdown: not the endpoint's fault, so no attempt is recorded; the delivery is
  // given back for the next worker (had this failed, the lease would lapse instead).
  // Recorded under a signal of its own, not the worker's stop: an attempt made must be recorded.
  const recording = detachedSignal();
  if (signal.aborted) {
    await env.deliveries.releaseLease(recording, delivery.seq);
    return { delivered: false, next: undefined };
  }
  const record = { at, statusCode: result.statusCode, latencyMs: result.latencyMs, error: result.error };
  const fields = { webhook_id: delivery.webhookId, event_id: delivery.eventId, status_code: result.statusCode, latency_ms: result.latencyMs };
  if (!result.error) {
    const recorded = await env.deliveries.recordDelivered(recording, delivery, record, chain && { now: env.clock(), leaseMs: chain.leaseMs });
    if (!recorded) return { delivered: false, next: undefined };
    env.metrics.deliveries.inc({ outcome: 'delivered' });
    return { delivered: true, next: recorded.next };
  }
  const outcome = await env.deliveries.recordFailure(recording, delivery, record, (failingSince) => decide(env, result, delivery.failures, failingSince, env.clock()));
  if (!outcome) return { delivered: false, next: undefined };
  env.metrics.deliveries.inc({ outcome: outcome.kind === 'disable' ? 'disabled' : outcome.kind });
  if (outcome.kind === 'disable') env.log.warn({ ...fields, error: result.error, reason: outcome.reason }, 'webhook endpoint disabled');
  else if (outcome.kind === 'failed') env.log.warn({ ...fields, error: result.error }, 'webhook delivery failed for good');
  else if (outcome.kind === 'retry') env.log.debug({ ...fields, error: result.error, next_attempt_at: outcome.at }, 'webhook attempt failed');
  return { delivered: false, next: undefined };
}

export interface WorkerOptions {
  /** Longest sleep when nothing wakes the loop and nothing falls due sooner. */
  pollMs: number;
  /** Most heads claimed by one query. */
  batchSize: number;
  /** Most webhooks being delivered to at once (each one delivery at a time). */
  concurrency: number;
  /**
   * Most deliveries of one webhook sent one after another before its queue goes back to the
   * claim, where heads that waited longer come first: a long queue cannot hold a slot for ever.
   */
  runLength: number;
  leaseMs: number;
  /**
   * Most slots the webhooks of one workspace hold at once: slow or tarpit endpoints of one
   * workspace (one tenant) cannot take every slot and delay the others' deliveries.
   */
  maxSlotsPerWorkspace: number;
}

/**
 * The delivery loop. It claims due heads (the oldest pending delivery of each webhook, with a
 * lease, FOR UPDATE SKIP LOCKED, so replicas share the work) into at most `concurrency` slots.
 * Each slot goes down its webhook's queue: a success records the attempt and claims the next
 * delivery of the same webhook in one statement, for up to `runLength` deliveries; then the slot
 * frees. With nothing to claim, the loop sleeps until woken (intake, replay, a slot that may have
 * left work behind), until the next head falls due, or at most `pollMs`.
 */
export class DeliveryWorker {
  private running = false;
  private loop: Promise<void> | undefined;
  private wakeUp: (() => void) | undefined;
  private woken = false;
  /** Wake-ups (intake, replay), counted so that a run can tell whether one came while it recorded. */
  private wakes = 0;
  /** Webhooks a run of this worker is going down the queue of. */
  private readonly inRun = new Set<string>();
  private readonly slots = new Set<Promise<unknown>>();
  /** Slots held per workspace. */
  private readonly held = new Map<string, number>();
  /**
   * Workspaces that may have deliveries due that no claim took because they held their share of
   * the slots: the next of their slots to free wakes the loop.
   */
  private readonly waiting = new Set<string>();
  /** Webhooks that had deliveries queued since the last claim: the next claim may look at these alone. */
  private readonly queuedFor = new Set<string>();
  /**
   * Whether the next claim must look at every webhook's head: at start, after a sleep ran out, a
   * replay, a slot that may have left work behind, a claim that filled the free slots, or a
   * failed pass (and at least once a poll interval). Otherwise only webhooks had deliveries
   * queued, and their heads are all it needs.
   */
  private claimAll = true;
  /** When the earliest head the last full claim left unclaimed falls due. */
  private nextDue: number | undefined;
  /** performance.now() of the last full claim: wake-ups coming faster than the poll must not put it off for good. */
  private lastClaimAll = 0;
  private readonly stopping = new AbortController();

  constructor(
    private readonly env: EventsEnv,
    private readonly options: WorkerOptions,
  ) {}

  start(): void {
    this.running = true;
    this.loop = this.run();
  }

  /**
   * Deliveries were queued for `webhookIds` (unknown: replayed), all of them webhooks whose slots
   * count under `slotsOf` when it is given. One for a webhook a run of this worker holds goes
   * out in that run, or in the claim that run's end asks for, and those of a workspace holding its
   * share of the slots wait for one of its slots to free (which wakes the loop), so only the
   * others wake the loop: while runs keep up, and while a workspace's slots hang on slow
   * endpoints, its intake costs the loop no claim.
   */
  wake(webhookIds?: string[], slotsOf?: string): void {
    this.wakes += 1;
    if (slotsOf !== undefined && (this.held.get(slotsOf) ?? 0) >= this.options.maxSlotsPerWorkspace) {
      this.waiting.add(slotsOf);
      return;
    }
    if (!webhookIds) {
      this.claimAll = true;
      this.rouse();
      return;
    }
    const outside = webhookIds.filter((id) => !this.inRun.has(id));
    if (outside.length === 0) return;
    for (const id of outside) this.queuedFor.add(id);
    this.rouse();
  }

  /** Sends everything due now, pass after pass, waiting for each; resolves with the number of attempts made. */
  async deliverDue(): Promise<number> {
    let attempts = 0;
    for (;;) {
      if (this.stopping.signal.aborted) return attempts;
      const { claimed } = await this.env.deliveries.claimDue(this.stopping.signal, this.env.clock(), this.options.batchSize, this.options.leaseMs);
      if (claimed.length === 0) {
        await this.housekeeping();
        return attempts;
      }
      for (const run of await Promise.all(claimed.map((head) => this.deliverRun(head)))) attempts += run.attempts;
    }
  }

  /** Retired webhooks and finished deliveries past their history go (a batch at a time). */
  private async housekeeping(): Promise<void> {
    await this.env.webhooks.sweepRetired(this.stopping.signal);
    await this.env.deliveries.pruneFinished(this.stopping.signal, this.env.clock() - this.env.limits.historyMs);
  }

  private rouse(): void {
    this.woken = true;
    this.wakeUp?.();
  }

  /**
   * Delivers `head`, then, while each succeeds and the run is short enough, the webhook's next
   * one. `drained` when it stopped because nothing of the webhook was due when its last success
   * was recorded and no wake-up came since: then the loop has nothing new to look for.
   */
  private async deliverRun(head: DueDelivery): Promise<{ attempts: number; drained: boolean }> {
    let delivery: DueDelivery | undefined = head;
    let attempts = 0;
    let drained = false;
    this.inRun.add(head.webhookId);
    while (delivery) {
      attempts += 1;
      const chain = attempts < this.options.runLength && !this.stopping.signal.aborted;
      const current: DueDelivery = delivery;
      const wakes = this.wakes;
      const outcome = await deliverOne(this.env, current, this.stopping.signal, chain ? { leaseMs: this.options.leaseMs } : undefined).catch(
        (err: unknown) => {
          this.env.log.error({ err, webhook_id: current.webhookId, event_id: current.eventId }, 'could not record a webhook attempt');
          return undefined;
        },
      );
      delivery = outcome?.next;
      // A delivery queued while this one was sent and recorded may have been invisible both to the
      // claim that statement made and to the loop's (which saw this one still in flight).
      drained = outcome?.delivered === true && chain && this.wakes === wakes;
    }
    // In the same turn as the last check: a wake-up from now on sees the webhook out of the run.
    this.inRun.delete(head.webhookId);
    return { attempts, drained };
  }

  private occupy(head: DueDelivery): void {
    this.held.set(head.workspaceId, (this.held.get(head.workspaceId) ?? 0) + 1);
    const slot = this.deliverRun(head).then(
      ({ drained }) => {
        this.slots.delete(slot);
        const left = (this.held.get(head.workspaceId) ?? 1) - 1;
        if (left > 0) this.held.set(head.workspaceId, left);
        else this.held.delete(head.workspaceId);
        // A full loop waits for a slot, and a workspace that held its share for one of its own;
        // otherwise only a run that may have left work due needs it.
        const awaited = this.waiting.delete(head.workspaceId);
        if (!drained || awaited || this.slots.size === this.options.concurrency - 1) {
          this.claimAll = true;
          this.rouse();
        }
      },
    );
    this.slots.add(slot);
  }

  private async run(): Promise<void> {
    // Housekeeping (retired webhooks, finished deliveries past their history) is cheap but not needed on every pass.
    let lastSweep = 0;
    while (this.running) {
      this.woken = false;
      let sleepMs = this.options.pollMs;
      try {
        const free = this.options.concurrency - this.slots.size;
        if (free > 0) {
          const limit = Math.min(free, this.options.batchSize);
          const max = this.options.maxSlotsPerWorkspace;
          const busy = [...this.held].filter(([, count]) => count >= max).map(([workspaceId]) => workspaceId);
          for (const workspaceId of busy) this.waiting.add(workspaceId);
          const queuedFor = [...this.queuedFor];
          this.queuedFor.clear();
          let claimed: DueDelivery[];
          if (this.claimAll || performance.now() - this.lastClaimAll >= this.options.pollMs) {
            this.claimAll = false;
            this.lastClaimAll = performance.now();
            ({ claimed, nextDue: this.nextDue } = await this.env.deliveries.claimDue(this.stopping.signal, this.env.clock(), limit, this.options.leaseMs, busy));
          } else if (queuedFor.length > 0) {
            // Only new deliveries since the last full claim: their webhooks' heads, not everyone's.
            claimed = await this.env.deliveries.claimHeads(this.stopping.signal, this.env.clock(), queuedFor, limit, this.options.leaseMs, busy);
          } else claimed = [];
          for (const head of claimed) {
            // One claim may bring more heads of a workspace than its share: the rest go back.
            if ((this.held.get(head.workspaceId) ?? 0) >= max) {
              await this.env.deliveries.releaseLease(this.stopping.signal, head.seq);
              this.waiting.add(head.workspaceId);
            } else this.occupy(head);
          }
          // More may be due: claim again, or, with every slot taken, wait below for one to free.
          if (claimed.length === limit) {
            this.claimAll = true;
            continue;
          }
          if (this.nextDue !== undefined) sleepMs = Math.min(sleepMs, Math.max(0, this.nextDue - this.env.clock()));
          if (performance.now() - lastSweep >= this.options.pollMs) {
            lastSweep = performance.now();
            await this.housekeeping();
          }
        }
      } catch (err) {
        this.claimAll = true;
        if (this.running) this.env.log.error({ err }, 'webhook delivery pass failed');
      }
      if (!this.running || this.woken) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          this.claimAll = true;
          resolve();
        }, Math.max(sleepMs, 10));
        this.wakeUp = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wakeUp = undefined;
    }
    await Promise.all(this.slots);
  }

  /** Stops the loop; attempts in flight are aborted and their deliveries given back (or their leases lapse). */
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
  const secrets = await env.webhooks.signingSecrets(ctx.signal, webhook.id, env.clock());
  const { at, result } = await attempt(env, { url: webhook.url, secrets, eventId, payload }, ctx.signal);
  await env.deliveries.recordTest(ctx.signal, {
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
  const deliveries = await env.deliveries.listDeliveries(ctx.signal, webhook.id, limit, status);
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
  const replayed = await env.deliveries.replay(
    ctx.signal,
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
