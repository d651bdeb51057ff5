import { z } from 'zod';
import { eventsv1 } from '@agenthub/proto';
import { HubError } from '@agenthub/runtime';
import { route, type Clients, type Route } from '../route.js';
import { field } from '../params.js';

const { DeliveryStatus } = eventsv1;

/** int64 epoch milliseconds as ISO 8601 UTC. */
const iso = (ms: bigint | undefined) => new Date(Number(ms ?? 0n)).toISOString();

/** A webhook as callers see it; `disabled_*` only while disabled; the secret only where given. */
function webhookView(webhook: eventsv1.Webhook | undefined, secret?: string) {
  if (!webhook) return undefined;
  return {
    id: webhook.id,
    workspace_id: webhook.workspaceId,
    url: webhook.url,
    events: webhook.events,
    description: webhook.description,
    enabled: webhook.enabled,
    ...(webhook.enabled ? {} : { disabled_reason: webhook.disabledReason, disabled_at: iso(webhook.disabledAt) }),
    created_at: iso(webhook.createdAt),
    created_by: webhook.createdBy,
    ...(secret ? { secret } : {}),
  };
}

const statusOf = { pending: DeliveryStatus.PENDING, delivered: DeliveryStatus.DELIVERED, failed: DeliveryStatus.FAILED } as const;
const statusName: Record<number, string> = {
  [DeliveryStatus.PENDING]: 'pending',
  [DeliveryStatus.DELIVERED]: 'delivered',
  [DeliveryStatus.FAILED]: 'failed',
};

function deliveryView(delivery: eventsv1.Delivery) {
  return {
    event_id: delivery.eventId,
    event: delivery.event,
    status: statusName[delivery.status] ?? 'pending',
    attempts: delivery.attempts.map((a) => ({
      at: iso(a.at),
      ...(a.statusCode ? { status_code: a.statusCode } : {}),
      latency_ms: a.latencyMs,
      ...(a.error ? { error: a.error } : {}),
    })),
    ...(delivery.nextAttemptAt ? { next_attempt_at: iso(delivery.nextAttemptAt) } : {}),
    created_at: iso(delivery.createdAt),
  };
}

// Shapes only: the events service checks URLs (and their addresses), event names and limits,
// and names the field.
const webhookParams = z.object({ workspace_id: field.workspaceId, webhook_id: field.id });

/** `since` of a replay: an ISO 8601 date-time. */
function sinceMs(text: string): bigint {
  const ms = Date.parse(text);
  if (!/^\d{4}-\d{2}-\d{2}T/.test(text) || Number.isNaN(ms)) throw HubError.invalidParams('since', 'must be an ISO 8601 date-time');
  return BigInt(ms);
}

/**
 * Webhook subscriptions of a workspace (`x-hub/webhooks.*`), forwarded to the events service,
 * which asks the workspace service for the caller's role (admin) on every call. The signing
 * secret appears only in the results of `create` and `rotate_secret`.
 */
export function webhookMethods(clients: Clients): [string, Route][] {
  const events = eventsv1.EventsService;
  return [
    ['x-hub/webhooks.create', route(clients, events, 'createWebhook', {
      params: z.object({
        workspace_id: field.workspaceId,
        url: z.string(),
        events: z.array(z.string()).max(50).optional(),
        description: z.string().optional(),
      }),
      request: (p) => ({ workspaceId: p.workspace_id, url: p.url, events: p.events ?? [], description: p.description ?? '' }),
      result: (r) => ({ webhook: webhookView(r.webhook, r.secret) }),
    })],
    ['x-hub/webhooks.list', route(clients, events, 'listWebhooks', {
      params: z.object({ workspace_id: field.workspaceId }),
      request: (p) => ({ workspaceId: p.workspace_id }),
      result: (r) => ({ webhooks: r.webhooks.map((w) => webhookView(w)) }),
    })],
    ['x-hub/webhooks.get', route(clients, events, 'getWebhook', {
      params: webhookParams,
      request: (p) => ({ workspaceId: p.workspace_id, webhookId: p.webhook_id }),
      result: (r) => ({ webhook: webhookView(r.webhook) }),
    })],
    ['x-hub/webhooks.delete', route(clients, events, 'deleteWebhook', {
      params: webhookParams,
      request: (p) => ({ workspaceId: p.workspace_id, webhookId: p.webhook_id }),
      result: (r) => ({ deleted: true, webhook_id: r.webhookId }),
    })],
    ['x-hub/webhooks.rotate_secret', route(clients, events, 'rotateWebhookSecret', {
      params: webhookParams,
      request: (p) => ({ workspaceId: p.workspace_id, webhookId: p.webhook_id }),
      result: (r) => ({ webhook: webhookView(r.webhook, r.secret), previous_secret_expires_at: iso(r.previousSecretExpiresAt) }),
    })],
    ['x-hub/webhooks.test', route(clients, events, 'testWebhook', {
      params: webhookParams,
      request: (p) => ({ workspaceId: p.workspace_id, webhookId: p.webhook_id }),
      result: (r) => ({
        delivery: {
          event_id: r.delivery?.eventId,
          status_code: r.delivery?.statusCode ?? 0,
          latency_ms: r.delivery?.latencyMs ?? 0,
          ...(r.delivery?.error ? { error: r.delivery.error } : {}),
          delivered: r.delivery?.delivered ?? false,
        },
      }),
    })],
    ['x-hub/webhooks.deliveries', route(clients, events, 'listDeliveries', {
      params: webhookParams.extend({
        limit: z.number().int().min(1).max(100).optional(),
        status: z.enum(['pending', 'delivered', 'failed']).optional(),
      }),
      request: (p) => ({
        workspaceId: p.workspace_id,
        webhookId: p.webhook_id,
        limit: p.limit ?? 0,
        status: p.status ? statusOf[p.status] : DeliveryStatus.UNSPECIFIED,
      }),
      result: (r) => ({ deliveries: r.deliveries.map(deliveryView) }),
    })],
    ['x-hub/webhooks.replay', route(clients, events, 'replayDeliveries', {
      params: webhookParams.extend({ event_id: z.string().min(1).max(128).optional(), since: z.string().optional() }),
      request: (p) => {
        if ((p.event_id === undefined) === (p.since === undefined)) {
          throw HubError.invalidParams(p.event_id === undefined ? 'event_id' : 'since', 'exactly one of event_id and since is required');
        }
        return {
          workspaceId: p.workspace_id,
          webhookId: p.webhook_id,
          target: p.event_id !== undefined
            ? { case: 'eventId' as const, value: p.event_id }
            : { case: 'since' as const, value: sinceMs(p.since!) },
        };
      },
      result: (r) => ({ replayed: r.replayed }),
    })],
  ];
}
