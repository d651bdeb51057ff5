import type { Db } from '@agenthub/runtime';

export interface WebhookRecord {
  id: string;
  workspaceId: string;
  url: string;
  events: string[];
  description: string;
  enabled: boolean;
  disabledReason: string;
  disabledAt: number;
  createdAt: number;
  /** The agent that created the webhook. */
  createdBy: string;
}

interface WebhookRow {
  id: string;
  workspace_id: string;
  url: string;
  event_types: string[];
  description: string;
  enabled: boolean;
  disabled_reason: string | null;
  disabled_at: number | null;
  created_at: number;
  created_by: string;
}

const WEBHOOK_COLUMNS = 'id, workspace_id, url, event_types, description, enabled, disabled_reason, disabled_at, created_at, created_by';

function toWebhook(row: WebhookRow): WebhookRecord {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    url: row.url,
    events: row.event_types,
    description: row.description,
    enabled: row.enabled,
    disabledReason: row.disabled_reason ?? '',
    disabledAt: Number(row.disabled_at ?? 0),
    createdAt: Number(row.created_at),
    createdBy: row.created_by,
  };
}

/** The webhooks table of the events service: endpoints, their filters and signing secrets. */
export class WebhookStore {
  constructor(private readonly db: Db) {}

  /**
   * Webhooks counted as their quotas count them: per workspace of `workspaceIds`, and agent-wide
   * per creator of `agentIds` (keys `agent:<id>`); only those holding any.
   */
  async webhookCounts(signal: AbortSignal, workspaceIds: readonly string[], agentIds: readonly string[]): Promise<Map<string, number>> {
    const { rows } = await this.db.query<{ scope: string; n: number }>(
      `SELECT CASE WHEN workspace_id = '' THEN 'agent:' || created_by ELSE workspace_id END AS scope, count(*)::int AS n
         FROM webhooks
        WHERE workspace_deleted_at IS NULL
          AND (workspace_id = ANY($1::text[]) OR (workspace_id = '' AND created_by = ANY($2::text[])))
        GROUP BY 1`,
      [workspaceIds, agentIds],
      signal,
    );
    return new Map(rows.map((r) => [r.scope, r.n]));
  }

  /**
   * Inserts a webhook unless the workspace (for an agent-wide one, `workspaceId` '': its creator)
   * already has `max`; false then.
   */
  async createWebhook(signal: AbortSignal, input: {
    id: string;
    workspaceId: string;
    url: string;
    events: string[];
    description: string;
    secret: string;
    agentId: string;
    tenantId: string;
    now: number;
    max: number;
  }): Promise<WebhookRecord | undefined> {
    return this.db.transaction(async (tx) => {
      // Serialises creations in one workspace so two concurrent calls cannot both pass the count.
      await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`webhooks:${input.workspaceId || `agent:${input.agentId}`}`]);
      const count = await tx.query<{ count: number }>(
        `SELECT count(*)::int AS count FROM webhooks
          WHERE workspace_id = $1 AND workspace_deleted_at IS NULL AND ($1 <> '' OR created_by = $2)`,
        [input.workspaceId, input.agentId],
      );
      if ((count.rows[0]?.count ?? 0) >= input.max) return undefined;
      const { rows } = await tx.query<WebhookRow>(
        `INSERT INTO webhooks (id, workspace_id, url, event_types, description, secret, created_at, created_by, agent_tenant_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING ${WEBHOOK_COLUMNS}`,
        [input.id, input.workspaceId, input.url, input.events, input.description, input.secret, input.now, input.agentId, input.tenantId],
      );
      return toWebhook(rows[0]!);
    }, signal);
  }

  /** The workspace's webhooks; for `workspaceId` '', the agent-wide ones `agentId` created. */
  async listWebhooks(signal: AbortSignal, workspaceId: string, agentId: string): Promise<WebhookRecord[]> {
    const { rows } = await this.db.query<WebhookRow>(
      `SELECT ${WEBHOOK_COLUMNS} FROM webhooks
        WHERE workspace_id = $1 AND workspace_deleted_at IS NULL AND ($1 <> '' OR created_by = $2) ORDER BY seq`,
      [workspaceId, agentId],
      signal,
    );
    return rows.map(toWebhook);
  }

  /** The webhook of the workspace; for `workspaceId` '', the agent-wide one if `agentId` created it. */
  async getWebhook(signal: AbortSignal, workspaceId: string, webhookId: string, agentId: string): Promise<WebhookRecord | undefined> {
    const { rows } = await this.db.query<WebhookRow>(
      `SELECT ${WEBHOOK_COLUMNS} FROM webhooks
        WHERE id = $1 AND workspace_id = $2 AND workspace_deleted_at IS NULL AND ($2 <> '' OR created_by = $3)`,
      [webhookId, workspaceId, agentId],
      signal,
    );
    return rows[0] && toWebhook(rows[0]);
  }

  /** Enabled agent-wide webhooks whose filter takes `type` and that existed at `occurredAt`. */
  async agentWebhooks(signal: AbortSignal, type: string, occurredAt: number | undefined): Promise<{ id: string; agentId: string; tenantId: string }[]> {
    const { rows } = await this.db.query<{ id: string; created_by: string; agent_tenant_id: string }>(
      `SELECT id, created_by, agent_tenant_id FROM webhooks
        WHERE workspace_id = '' AND enabled AND (cardinality(event_types) = 0 OR $1 = ANY (event_types))
          AND ($2::bigint IS NULL OR created_at <= $2::bigint)
        ORDER BY seq`,
      [type, occurredAt ?? null],
      signal,
    );
    return rows.map((r) => ({ id: r.id, agentId: r.created_by, tenantId: r.agent_tenant_id }));
  }

  /** The current secret and, within its window, the previous one: what a delivery is signed with. */
  async signingSecrets(signal: AbortSignal, webhookId: string, now: number): Promise<string[]> {
    const { rows } = await this.db.query<{ secret: string; previous_secret: string | null; previous_expires_at: number | null }>(
      'SELECT secret, previous_secret, previous_expires_at FROM webhooks WHERE id = $1',
      [webhookId],
      signal,
    );
    const row = rows[0];
    if (!row) return [];
    return secretsOf(row, now);
  }

  async deleteWebhook(signal: AbortSignal, workspaceId: string, webhookId: string): Promise<boolean> {
    const { rowCount } = await this.db.query('DELETE FROM webhooks WHERE id = $1 AND workspace_id = $2 AND workspace_deleted_at IS NULL', [
      webhookId,
      workspaceId,
    ], signal);
    return rowCount > 0;
  }

  /** Replaces the secret, keeping the old one signing until `previousUntil`. */
  async rotateSecret(signal: AbortSignal, workspaceId: string, webhookId: string, secret: string, previousUntil: number): Promise<WebhookRecord | undefined> {
    const { rows } = await this.db.query<WebhookRow>(
      `UPDATE webhooks SET previous_secret = secret, previous_expires_at = $3, secret = $4
        WHERE id = $1 AND workspace_id = $2 AND workspace_deleted_at IS NULL RETURNING ${WEBHOOK_COLUMNS}`,
      [webhookId, workspaceId, previousUntil, secret],
      signal,
    );
    return rows[0] && toWebhook(rows[0]);
  }

  /** Deletes webhooks of deleted workspaces once nothing is pending for them any more. */
  async sweepRetired(signal: AbortSignal): Promise<number> {
    const { rowCount } = await this.db.query(
      `DELETE FROM webhooks w WHERE w.workspace_deleted_at IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.webhook_id = w.id AND d.status = 'pending')`,
          [],
          signal,
    );
    return rowCount;
  }
}

/** The current secret first, then the previous one while its window lasts. */
export function secretsOf(row: { secret: string; previous_secret: string | null; previous_expires_at: string | number | null }, now: number): string[] {
  const previousValid = row.previous_secret && row.previous_expires_at !== null && Number(row.previous_expires_at) > now;
  return previousValid ? [row.secret, row.previous_secret!] : [row.secret];
}
