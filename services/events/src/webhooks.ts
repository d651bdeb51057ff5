import type { eventsv1 } from '@agenthub/proto';
import { callerOf, checkTargetUrl, HubError, newId, type CallContext } from '@agenthub/runtime';
import { requireAdmin } from './access.js';
import type { EventsEnv } from './env.js';
import { newSigningSecret } from './signing.js';
import type { WebhookRecord } from './webhook-store.js';
import * as validate from './validate.js';

/** The wire shape of a webhook; never its secret. */
export function webhookInfo(webhook: WebhookRecord) {
  return {
    id: webhook.id,
    workspaceId: webhook.workspaceId,
    url: webhook.url,
    events: webhook.events,
    description: webhook.description,
    enabled: webhook.enabled,
    createdAt: BigInt(webhook.createdAt),
    disabledReason: webhook.disabledReason,
    disabledAt: BigInt(webhook.disabledAt),
    createdBy: webhook.createdBy,
  };
}

/**
 * The workspace a webhook call is about: '' (no workspace_id) names the caller's agent-wide
 * webhooks, which need no role (they deliver only what the caller administers, checked per event).
 */
async function scope(env: EventsEnv, ctx: CallContext, raw: string): Promise<string> {
  if (raw === '') return '';
  const workspaceId = validate.workspaceId(raw);
  await requireAdmin(env.workspace, ctx, workspaceId);
  return workspaceId;
}

/** Admin role, then the webhook of that workspace (NOT_FOUND `Webhook not found` otherwise). */
export async function adminWebhook(env: EventsEnv, ctx: CallContext, request: { workspaceId: string; webhookId: string }) {
  const caller = callerOf(ctx);
  if (request.workspaceId !== '') validate.workspaceId(request.workspaceId);
  const webhookId = validate.webhookId(request.webhookId);
  const workspaceId = await scope(env, ctx, request.workspaceId);
  const webhook = await env.webhooks.getWebhook(ctx.signal, workspaceId, webhookId, caller.agentId);
  if (!webhook) throw HubError.notFound('Webhook not found');
  return webhook;
}

export async function createWebhook(env: EventsEnv, ctx: CallContext, request: eventsv1.CreateWebhookRequest) {
  const caller = callerOf(ctx);
  if (request.workspaceId !== '') validate.workspaceId(request.workspaceId);
  const events = validate.eventTypes(request.events);
  const description = validate.description(request.description);
  // Syntax before the role check; the DNS look-up only for an admin.
  const syntaxOnly = await checkTargetUrl(request.url, 'url', { ...env.policy, allowPrivate: true });
  const workspaceId = await scope(env, ctx, request.workspaceId);
  const url = env.policy.allowPrivate ? syntaxOnly : await checkTargetUrl(request.url, 'url', env.policy);
  const secret = newSigningSecret();
  const max = env.limits.maxWebhooksPerWorkspace;
  const webhook = await env.webhooks.createWebhook(ctx.signal, {
    id: newId('wh'),
    workspaceId,
    url,
    events,
    description,
    secret,
    agentId: caller.agentId,
    tenantId: caller.tenantId,
    now: env.clock(),
    max,
  });
  if (!webhook) {
    throw workspaceId
      ? HubError.quotaExceeded('webhooks_per_workspace', `Quota exceeded: a workspace holds at most ${max} webhooks; delete one first`)
      : HubError.quotaExceeded('webhooks_per_agent', `Quota exceeded: an agent holds at most ${max} agent-wide webhooks; delete one first`);
  }
  ctx.log.info({ workspace_id: workspaceId, webhook_id: webhook.id }, 'webhook created');
  return { webhook: webhookInfo(webhook), secret };
}

export async function listWebhooks(env: EventsEnv, ctx: CallContext, request: eventsv1.ListWebhooksRequest) {
  const caller = callerOf(ctx);
  if (request.workspaceId !== '') validate.workspaceId(request.workspaceId);
  const workspaceId = await scope(env, ctx, request.workspaceId);
  return { webhooks: (await env.webhooks.listWebhooks(ctx.signal, workspaceId, caller.agentId)).map(webhookInfo) };
}

export async function getWebhook(env: EventsEnv, ctx: CallContext, request: eventsv1.GetWebhookRequest) {
  return { webhook: webhookInfo(await adminWebhook(env, ctx, request)) };
}

export async function deleteWebhook(env: EventsEnv, ctx: CallContext, request: eventsv1.DeleteWebhookRequest) {
  const webhook = await adminWebhook(env, ctx, request);
  if (!(await env.webhooks.deleteWebhook(ctx.signal, webhook.workspaceId, webhook.id))) throw HubError.notFound('Webhook not found');
  ctx.log.info({ workspace_id: webhook.workspaceId, webhook_id: webhook.id }, 'webhook deleted');
  return { webhookId: webhook.id };
}

export async function rotateWebhookSecret(env: EventsEnv, ctx: CallContext, request: eventsv1.RotateWebhookSecretRequest) {
  const webhook = await adminWebhook(env, ctx, request);
  const secret = newSigningSecret();
  const previousUntil = env.clock() + env.limits.secretRotationWindowMs;
  const rotated = await env.webhooks.rotateSecret(ctx.signal, webhook.workspaceId, webhook.id, secret, previousUntil);
  if (!rotated) throw HubError.notFound('Webhook not found');
  ctx.log.info({ workspace_id: webhook.workspaceId, webhook_id: webhook.id }, 'webhook secret rotated');
  return { webhook: webhookInfo(rotated), secret, previousSecretExpiresAt: BigInt(previousUntil) };
}
