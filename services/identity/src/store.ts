import { identityv1 } from '@agenthub/proto';
import { isUniqueViolation, type Db, type Queryable } from '@agenthub/runtime';

const GrantStatus = identityv1.GrantStatus;
type GrantStatus = identityv1.GrantStatus;

/** A grant status other than UNSPECIFIED: what a stored grant can be. */
export type StoredGrantStatus = Exclude<identityv1.GrantStatus, identityv1.GrantStatus.UNSPECIFIED>;

/**
 * The records below are shaped like their proto messages so handlers can return them as is;
 * timestamps are epoch milliseconds, as bigint because protobuf-es maps every int64 to bigint.
 */
export interface TenantRecord {
  id: string;
  name: string;
  createdAt: bigint;
}

export interface AgentRecord {
  id: string;
  tenantId: string;
  name: string;
  endpointUrl: string;
  outputModes: string[];
  createdAt: bigint;
  description: string;
  skills: AgentSkillRecord[];
}

/** One skill of an agent's Agent Card. */
export interface AgentSkillRecord {
  id: string;
  name: string;
  description: string;
  tags: string[];
}

export interface ApiKeyRecord {
  id: string;
  agentId: string;
  prefix: string;
  createdAt: bigint;
  /** 0 while the key is active. */
  revokedAt: bigint;
}

export interface GrantRecord {
  id: string;
  requesterAgentId: string;
  targetAgentId: string;
  status: GrantStatus;
  createdAt: bigint;
  updatedAt: bigint;
}

export interface KeyOwner {
  agentId: string;
  tenantId: string;
}

const statusText: Record<StoredGrantStatus, string> = {
  [GrantStatus.PENDING]: 'pending',
  [GrantStatus.APPROVED]: 'approved',
  [GrantStatus.REVOKED]: 'revoked',
};

const statusOfText: Record<string, GrantStatus> = {
  pending: GrantStatus.PENDING,
  approved: GrantStatus.APPROVED,
  revoked: GrantStatus.REVOKED,
};

/** A tenant's limit overrides as the `limits` column holds them. */
export interface StoredLimits {
  key?: { per_sec: number; burst: number };
  tenant?: { per_sec: number; burst: number };
  max_waiting_per_agent?: number;
  /** Quota overrides by name (`agents_per_tenant`, …). */
  quotas?: Record<string, number>;
}

interface TenantRow {
  id: string;
  name: string;
  created_at: number;
}

interface AgentRow {
  id: string;
  tenant_id: string;
  name: string;
  endpoint_url: string;
  output_modes: string[];
  created_at: number;
  description: string;
  skills: AgentSkillRecord[];
}

interface ApiKeyRow {
  id: string;
  agent_id: string;
  key_hash: string;
  prefix: string;
  created_at: number;
  revoked_at: number | null;
}

interface GrantRow {
  id: string;
  requester_agent_id: string;
  target_agent_id: string;
  status: string;
  created_at: number;
  updated_at: number;
}

const tenantOf = (r: TenantRow): TenantRecord => ({ id: r.id, name: r.name, createdAt: BigInt(r.created_at) });

const agentOf = (r: AgentRow): AgentRecord => ({
  id: r.id,
  tenantId: r.tenant_id,
  name: r.name,
  endpointUrl: r.endpoint_url,
  outputModes: r.output_modes,
  createdAt: BigInt(r.created_at),
  description: r.description,
  skills: r.skills,
});

const keyOf = (r: ApiKeyRow): ApiKeyRecord => ({
  id: r.id,
  agentId: r.agent_id,
  prefix: r.prefix,
  createdAt: BigInt(r.created_at),
  revokedAt: BigInt(r.revoked_at ?? 0),
});

const grantOf = (r: GrantRow): GrantRecord => ({
  id: r.id,
  requesterAgentId: r.requester_agent_id,
  targetAgentId: r.target_agent_id,
  status: statusOfText[r.status] ?? GrantStatus.UNSPECIFIED,
  createdAt: BigInt(r.created_at),
  updatedAt: BigInt(r.updated_at),
});

const KEY_COLUMNS = 'id, agent_id, key_hash, prefix, created_at, revoked_at';
const GRANT_COLUMNS = 'id, requester_agent_id, target_agent_id, status, created_at, updated_at';
// Matches the expressions of grants_live_pair_idx, so pair lookups use that index.
const PAIR = `LEAST(requester_agent_id, target_agent_id) = LEAST($1, $2)
  AND GREATEST(requester_agent_id, target_agent_id) = GREATEST($1, $2)`;

/** Every statement the identity service runs. Bound to the pool, or to one transaction. */
export class IdentityStore {
  constructor(
    private readonly db: Db,
    private readonly q: Queryable = db,
  ) {}

  /** Runs `work` with a store whose statements all belong to one transaction. */
  transaction<T>(signal: AbortSignal, work: (store: IdentityStore) => Promise<T>): Promise<T> {
    return this.db.transaction((tx) => work(new IdentityStore(this.db, tx)), signal);
  }

  /** Undefined when the tenant already exists. */
  async insertTenant(signal: AbortSignal, tenant: { id: string; name: string; at: number }): Promise<TenantRecord | undefined> {
    const { rows } = await this.q.query<TenantRow>(
      `INSERT INTO tenants (id, name, created_at) VALUES ($1, $2, $3)
       ON CONFLICT (id) DO NOTHING RETURNING id, name, created_at`,
      [tenant.id, tenant.name, tenant.at],
      signal,
    );
    return rows[0] && tenantOf(rows[0]);
  }

  async tenant(signal: AbortSignal, id: string): Promise<TenantRecord | undefined> {
    const { rows } = await this.q.query<TenantRow>('SELECT id, name, created_at FROM tenants WHERE id = $1', [id], signal);
    return rows[0] && tenantOf(rows[0]);
  }

  /** The stored overrides (JSON), or undefined when there is no such tenant. */
  async tenantLimits(signal: AbortSignal, id: string): Promise<StoredLimits | undefined> {
    const { rows } = await this.q.query<{ limits: StoredLimits | string }>('SELECT limits FROM tenants WHERE id = $1', [id], signal);
    const raw = rows[0]?.limits;
    return raw === undefined ? undefined : typeof raw === 'string' ? (JSON.parse(raw) as StoredLimits) : raw;
  }

  /**
   * The tenant's overrides, its row locked until the transaction ends, so agent creations of one
   * tenant count its agents one after another; undefined when there is no such tenant.
   */
  async lockTenantLimits(signal: AbortSignal, id: string): Promise<StoredLimits | undefined> {
    const { rows } = await this.q.query<{ limits: StoredLimits | string }>('SELECT limits FROM tenants WHERE id = $1 FOR UPDATE', [id], signal);
    const raw = rows[0]?.limits;
    return raw === undefined ? undefined : typeof raw === 'string' ? (JSON.parse(raw) as StoredLimits) : raw;
  }

  /** Every tenant's agents and its override of `agents_per_tenant` (null: the default). */
  async agentCounts(signal: AbortSignal): Promise<{ tenant: string; agents: number; quota: string | null }[]> {
    const { rows } = await this.q.query<{ tenant: string; agents: number; quota: string | null }>(
      `SELECT t.id AS tenant, count(a.id)::int AS agents, t.limits->'quotas'->>'agents_per_tenant' AS quota
         FROM tenants t LEFT JOIN agents a ON a.tenant_id = t.id GROUP BY t.id`,
      [],
      signal,
    );
    return rows;
  }

  async agentCount(signal: AbortSignal, tenantId: string): Promise<number> {
    const { rows } = await this.q.query<{ n: string | number }>('SELECT count(*) AS n FROM agents WHERE tenant_id = $1', [tenantId], signal);
    return Number(rows[0]?.n ?? 0);
  }

  /** False when there is no such tenant. */
  async setTenantLimits(signal: AbortSignal, id: string, limits: StoredLimits): Promise<boolean> {
    const { rows } = await this.q.query<{ id: string }>('UPDATE tenants SET limits = $2::jsonb WHERE id = $1 RETURNING id', [id, JSON.stringify(limits)], signal);
    return rows.length > 0;
  }

  async tenants(signal: AbortSignal): Promise<TenantRecord[]> {
    const { rows } = await this.q.query<TenantRow>('SELECT id, name, created_at FROM tenants ORDER BY id', [], signal);
    return rows.map(tenantOf);
  }

  /** Throws a unique violation when the id is taken. `pushSecret` is null for agents without an endpoint. */
  async insertAgent(signal: AbortSignal, agent: Omit<AgentRecord, 'createdAt'> & { at: number; pushSecret: string | null }): Promise<AgentRecord> {
    const { rows } = await this.q.query<AgentRow>(
      `INSERT INTO agents (id, tenant_id, name, endpoint_url, output_modes, created_at, description, skills, push_secret)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9) RETURNING *`,
      [agent.id, agent.tenantId, agent.name, agent.endpointUrl, agent.outputModes, agent.at, agent.description, JSON.stringify(agent.skills), agent.pushSecret],
      signal,
    );
    return agentOf(rows[0] as AgentRow);
  }

  /** An agent's push secret: undefined for an unknown agent, null when it has none. */
  async pushSecret(signal: AbortSignal, agentId: string): Promise<string | null | undefined> {
    const { rows } = await this.q.query<{ push_secret: string | null }>('SELECT push_secret FROM agents WHERE id = $1', [agentId], signal);
    return rows[0] ? rows[0].push_secret : undefined;
  }

  /** Replaces a push agent's secret; false when there is no agent with an endpoint by that id. */
  async setPushSecret(signal: AbortSignal, agentId: string, secret: string): Promise<boolean> {
    const { rowCount } = await this.q.query("UPDATE agents SET push_secret = $2 WHERE id = $1 AND endpoint_url <> ''", [agentId, secret], signal);
    return (rowCount ?? 0) > 0;
  }

  async agent(signal: AbortSignal, id: string): Promise<AgentRecord | undefined> {
    const { rows } = await this.q.query<AgentRow>('SELECT * FROM agents WHERE id = $1', [id], signal);
    return rows[0] && agentOf(rows[0]);
  }

  /** Every tenant's agents when `tenantId` is undefined. */
  async agents(signal: AbortSignal, tenantId: string | undefined): Promise<AgentRecord[]> {
    const { rows } = await this.q.query<AgentRow>(
      `SELECT * FROM agents WHERE $1::text IS NULL OR tenant_id = $1 ORDER BY tenant_id, created_at, id`,
      [tenantId ?? null],
      signal,
    );
    return rows.map(agentOf);
  }

  /** Undefined when the agent does not exist. */
  async insertKey(signal: AbortSignal, key: { id: string; agentId: string; keyHash: string; prefix: string; at: number }): Promise<ApiKeyRecord | undefined> {
    const { rows } = await this.q.query<ApiKeyRow>(
      `INSERT INTO api_keys (id, agent_id, key_hash, prefix, created_at)
       SELECT $1, $2, $3, $4, $5 WHERE EXISTS (SELECT 1 FROM agents WHERE id = $2)
       RETURNING ${KEY_COLUMNS}`,
      [key.id, key.agentId, key.keyHash, key.prefix, key.at],
      signal,
    );
    return rows[0] && keyOf(rows[0]);
  }

  /** Marks the key revoked unless it already is; undefined when there is no such key. */
  async revokeKey(signal: AbortSignal, id: string, at: number): Promise<{ key: ApiKeyRecord; keyHash: string } | undefined> {
    const { rows } = await this.q.query<ApiKeyRow>(
      `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1 RETURNING ${KEY_COLUMNS}`,
      [id, at],
      signal,
    );
    return rows[0] && { key: keyOf(rows[0]), keyHash: rows[0].key_hash };
  }

  async keys(signal: AbortSignal, agentId: string): Promise<ApiKeyRecord[]> {
    const { rows } = await this.q.query<ApiKeyRow>(
      `SELECT ${KEY_COLUMNS} FROM api_keys WHERE agent_id = $1 ORDER BY created_at, id`,
      [agentId],
      signal,
    );
    return rows.map(keyOf);
  }

  /** The agent an active key belongs to. */
  async ownerOfKey(signal: AbortSignal, keyHash: string): Promise<KeyOwner | undefined> {
    const { rows } = await this.q.query<{ agent_id: string; tenant_id: string }>(
      `SELECT k.agent_id, a.tenant_id FROM api_keys k JOIN agents a ON a.id = k.agent_id
       WHERE k.key_hash = $1 AND k.revoked_at IS NULL`,
      [keyHash],
      signal,
    );
    return rows[0] && { agentId: rows[0].agent_id, tenantId: rows[0].tenant_id };
  }

  /** The pending or approved grant between two agents, whichever asked. */
  async liveGrantBetween(signal: AbortSignal, a: string, b: string): Promise<GrantRecord | undefined> {
    const { rows } = await this.q.query<GrantRow>(
      `SELECT ${GRANT_COLUMNS} FROM grants WHERE ${PAIR} AND status IN ('pending', 'approved')`,
      [a, b],
      signal,
    );
    return rows[0] && grantOf(rows[0]);
  }

  async approvedGrantBetween(signal: AbortSignal, a: string, b: string): Promise<GrantRecord | undefined> {
    const { rows } = await this.q.query<GrantRow>(
      `SELECT ${GRANT_COLUMNS} FROM grants WHERE ${PAIR} AND status = 'approved'`,
      [a, b],
      signal,
    );
    return rows[0] && grantOf(rows[0]);
  }

  /** Inserts a pending grant; undefined when a live grant already links the pair. */
  async insertPendingGrant(signal: AbortSignal, grant: { id: string; requesterAgentId: string; targetAgentId: string; at: number }): Promise<GrantRecord | undefined> {
    const { rows } = await this.q.query<GrantRow>(
      `INSERT INTO grants (id, requester_agent_id, target_agent_id, status, created_at, updated_at)
       VALUES ($1, $2, $3, 'pending', $4, $4)
       ON CONFLICT ((LEAST(requester_agent_id, target_agent_id)), (GREATEST(requester_agent_id, target_agent_id)))
         WHERE status IN ('pending', 'approved') DO NOTHING
       RETURNING ${GRANT_COLUMNS}`,
      [grant.id, grant.requesterAgentId, grant.targetAgentId, grant.at],
      signal,
    );
    return rows[0] && grantOf(rows[0]);
  }

  /** Reads a grant and locks it until the transaction ends; use inside `transaction`. */
  async grantForUpdate(signal: AbortSignal, id: string): Promise<GrantRecord | undefined> {
    const { rows } = await this.q.query<GrantRow>(`SELECT ${GRANT_COLUMNS} FROM grants WHERE id = $1 FOR UPDATE`, [id], signal);
    return rows[0] && grantOf(rows[0]);
  }

  async setGrantStatus(signal: AbortSignal, id: string, status: StoredGrantStatus, at: number): Promise<GrantRecord> {
    const { rows } = await this.q.query<GrantRow>(
      `UPDATE grants SET status = $2, updated_at = $3 WHERE id = $1 RETURNING ${GRANT_COLUMNS}`,
      [id, statusText[status], at],
      signal,
    );
    if (!rows[0]) throw new Error(`Grant ${id} vanished while locked`);
    return grantOf(rows[0]);
  }

  /**
   * Grants the agent is part of, either side, newest first; every status when undefined. At most
   * `limit`, after the position of the previous page's last grant; each with its position.
   */
  async grantsOf(
    signal: AbortSignal,
    agentId: string,
    status: StoredGrantStatus | undefined,
    page: { limit: number; after?: GrantCursor },
  ): Promise<{ grant: GrantRecord; position: GrantCursor }[]> {
    const { rows } = await this.q.query<GrantRow & { seq: number }>(
      `SELECT ${GRANT_COLUMNS}, seq FROM grants
       WHERE (requester_agent_id = $1 OR target_agent_id = $1) AND ($2::text IS NULL OR status = $2)
         AND ($3::bigint IS NULL OR (created_at, seq) < ($3::bigint, $4::bigint))
       ORDER BY created_at DESC, seq DESC
       LIMIT $5`,
      [agentId, status === undefined ? null : statusText[status], page.after?.createdAt ?? null, page.after?.seq ?? null, page.limit],
      signal,
    );
    return rows.map((row) => ({ grant: grantOf(row), position: { createdAt: Number(row.created_at), seq: Number(row.seq) } }));
  }

  /**
   * Reuses the pair's most recent revoked grant row for a new pending request from
   * `requesterAgentId` under the new `id` (the revoked grant's id is gone, like the grant): a pair
   * keeps one row however often it is requested and revoked. Undefined when the pair has
   * no revoked grant, or another request made one live first.
   */
  async reopenRevokedGrant(signal: AbortSignal, grant: { id: string; requesterAgentId: string; targetAgentId: string; at: number }): Promise<GrantRecord | undefined> {
    try {
      const { rows } = await this.q.query<GrantRow>(
        `UPDATE grants SET id = $4, requester_agent_id = $1, target_agent_id = $2, status = 'pending', created_at = $3, updated_at = $3
         WHERE status = 'revoked' AND id = (
           SELECT id FROM grants WHERE ${PAIR} AND status = 'revoked' ORDER BY updated_at DESC, seq DESC LIMIT 1)
         RETURNING ${GRANT_COLUMNS}`,
        [grant.requesterAgentId, grant.targetAgentId, grant.at, grant.id],
        signal,
      );
      return rows[0] && grantOf(rows[0]);
    } catch (err) {
      // The live-pair index: a concurrent request made the pair live meanwhile.
      if (isUniqueViolation(err)) return undefined;
      throw err;
    }
  }
}

/** A grant's place in the newest-first listing: its creation time and insertion order. */
export interface GrantCursor {
  createdAt: number;
  seq: number;
}
