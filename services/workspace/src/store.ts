import { workspacev1 } from '@agenthub/proto';
import { appendEvent, type Db, type OutboxEvent } from '@agenthub/runtime';

const { Role } = workspacev1;
type Role = workspacev1.Role;

export interface WorkspaceRecord {
  id: string;
  name: string;
  description: string;
  ownerAgentId: string;
  ownerTenantId: string;
  createdAt: number;
}

export interface MemberRecord {
  workspaceId: string;
  agentId: string;
  agentName: string;
  tenantId: string;
  role: Role;
  addedBy: string;
  addedAt: number;
}

/** A membership together with its workspace, as ListWorkspaces needs them. */
export interface MembershipRecord {
  workspace: WorkspaceRecord;
  member: MemberRecord;
}

interface WorkspaceRow {
  id: string;
  name: string;
  description: string;
  owner_agent_id: string;
  owner_tenant_id: string;
  created_at: number;
}

interface MemberRow {
  workspace_id: string;
  agent_id: string;
  agent_name: string;
  tenant_id: string;
  role: string;
  added_by: string;
  added_at: number;
}

const ROLE_TEXT = new Map<Role, string>([
  [Role.READ, 'read'],
  [Role.WRITE, 'write'],
  [Role.ADMIN, 'admin'],
]);
const ROLE_OF_TEXT = new Map([...ROLE_TEXT].map(([role, text]) => [text, role]));

export function roleText(role: Role): string {
  const text = ROLE_TEXT.get(role);
  if (!text) throw new Error(`Role ${role} cannot be stored`);
  return text;
}

function toWorkspace(row: WorkspaceRow): WorkspaceRecord {
  return {
    id: row.id,
    name: row.name,
    description: row.description,
    ownerAgentId: row.owner_agent_id,
    ownerTenantId: row.owner_tenant_id,
    createdAt: row.created_at,
  };
}

function toMember(row: MemberRow): MemberRecord {
  return {
    workspaceId: row.workspace_id,
    agentId: row.agent_id,
    agentName: row.agent_name,
    tenantId: row.tenant_id,
    // The column's CHECK constraint admits only the three known roles.
    role: ROLE_OF_TEXT.get(row.role) as Role,
    addedBy: row.added_by,
    addedAt: row.added_at,
  };
}

const MEMBER_COLUMNS = 'workspace_id, agent_id, agent_name, tenant_id, role, added_by, added_at';

/** Values in MEMBER_COLUMNS order. */
function memberValues(member: MemberRecord): unknown[] {
  return [member.workspaceId, member.agentId, member.agentName, member.tenantId, roleText(member.role), member.addedBy, member.addedAt];
}

/** All SQL of the workspace service: workspaces and members in the service's own schema. */
export class WorkspaceStore {
  constructor(private readonly db: Db) {}

  /** Inserts the workspace and its owner's admin membership together, with `event`. */
  /** False, and nothing written, when the owner's tenant already owns `maxPerTenant` workspaces. */
  async createWorkspace(signal: AbortSignal, workspace: WorkspaceRecord, owner: MemberRecord, event: OutboxEvent, maxPerTenant: number): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      // Serialises creations in one tenant so two concurrent calls cannot both pass the count.
      await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`workspaces:${workspace.ownerTenantId}`]);
      const count = await tx.query<{ count: number }>('SELECT count(*)::int AS count FROM workspaces WHERE owner_tenant_id = $1', [workspace.ownerTenantId]);
      if ((count.rows[0]?.count ?? 0) >= maxPerTenant) return false;
      await tx.query(
        `INSERT INTO workspaces (id, name, description, owner_agent_id, owner_tenant_id, created_at)
         VALUES ($1, $2, $3, $4, $5, $6)`,
        [workspace.id, workspace.name, workspace.description, workspace.ownerAgentId, workspace.ownerTenantId, workspace.createdAt],
      );
      await tx.query(`INSERT INTO members (${MEMBER_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)`, memberValues(owner));
      await appendEvent(tx, event);
      return true;
    }, signal);
  }

  /**
   * Every tenant's workspaces, and the most memories, bytes of memories and members any one of
   * them holds: one grouped read of all tenants for the quota gauges.
   */
  async quotaUsageByTenant(signal: AbortSignal): Promise<{ tenant: string; workspaces: number; memories: number; bytes: string | number; members: number }[]> {
    const { rows } = await this.db.query<{ tenant: string; workspaces: number; memories: number; bytes: string | number; members: number }>(
      `SELECT w.owner_tenant_id AS tenant, count(*)::int AS workspaces, coalesce(max(m.n), 0)::int AS memories,
              coalesce(max(m.bytes), 0)::bigint AS bytes, coalesce(max(mb.n), 0)::int AS members
         FROM workspaces w
         LEFT JOIN (SELECT workspace_id, count(*) AS n, sum(octet_length(content)) AS bytes FROM memories GROUP BY workspace_id) m ON m.workspace_id = w.id
         LEFT JOIN (SELECT workspace_id, count(*) AS n FROM members GROUP BY workspace_id) mb ON mb.workspace_id = w.id
        GROUP BY w.owner_tenant_id`,
      [],
      signal,
    );
    return rows;
  }

  /** Each workspace the tenant owns, with its memories and their content's bytes. */
  async tenantUsage(signal: AbortSignal, tenantId: string): Promise<{ id: string; memories: number; bytes: string | number; members: number }[]> {
    const { rows } = await this.db.query<{ id: string; memories: number; bytes: string | number; members: number }>(
      `SELECT w.id, count(m.id)::int AS memories, coalesce(sum(octet_length(m.content)), 0)::bigint AS bytes,
              (SELECT count(*)::int FROM members mb WHERE mb.workspace_id = w.id) AS members
         FROM workspaces w LEFT JOIN memories m ON m.workspace_id = w.id
        WHERE w.owner_tenant_id = $1 GROUP BY w.id ORDER BY w.id`,
      [tenantId],
      signal,
    );
    return rows;
  }

  async getWorkspace(signal: AbortSignal, id: string): Promise<WorkspaceRecord | undefined> {
    const { rows } = await this.db.query<WorkspaceRow>('SELECT * FROM workspaces WHERE id = $1', [id], signal);
    return rows[0] && toWorkspace(rows[0]);
  }

  /** Deletes the workspace and, by cascade, its members; false when it was already gone. */
  async deleteWorkspace(signal: AbortSignal, id: string, event: OutboxEvent): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      const { rowCount } = await tx.query('DELETE FROM workspaces WHERE id = $1', [id]);
      if (rowCount > 0) await appendEvent(tx, event);
      return rowCount > 0;
    }, signal);
  }

  /**
   * The workspace and the agent's member row in one round trip, since every workspace call
   * needs both before anything else; `member` is undefined for a non-member. `countMembers` adds
   * the member count to the same statement (one round trip for `GetWorkspace`).
   */
  async getWorkspaceWithMember(
    signal: AbortSignal,
    workspaceId: string,
    agentId: string,
    options: { countMembers?: boolean } = {},
  ): Promise<{ workspace: WorkspaceRecord; member: MemberRecord | undefined; memberCount?: number } | undefined> {
    const { rows } = await this.db.query<WorkspaceRow & { m_agent_id: string | null; m_agent_name: string; m_tenant_id: string; m_role: string; m_added_by: string; m_added_at: number; member_count?: number }>(
      `SELECT w.id, w.name, w.description, w.owner_agent_id, w.owner_tenant_id, w.created_at,
              m.agent_id AS m_agent_id, m.agent_name AS m_agent_name, m.tenant_id AS m_tenant_id,
              m.role AS m_role, m.added_by AS m_added_by, m.added_at AS m_added_at${options.countMembers ? `,
              (SELECT count(*)::int FROM members c WHERE c.workspace_id = w.id) AS member_count` : ''}
         FROM workspaces w LEFT JOIN members m ON m.workspace_id = w.id AND m.agent_id = $2
        WHERE w.id = $1`,
      [workspaceId, agentId],
      signal,
    );
    const row = rows[0];
    if (!row) return undefined;
    const member = row.m_agent_id === null
      ? undefined
      : toMember({
          workspace_id: row.id,
          agent_id: row.m_agent_id,
          agent_name: row.m_agent_name,
          tenant_id: row.m_tenant_id,
          role: row.m_role,
          added_by: row.m_added_by,
          added_at: row.m_added_at,
        });
    return { workspace: toWorkspace(row), member, ...(options.countMembers ? { memberCount: row.member_count ?? 0 } : {}) };
  }

  /** Members ordered by added_at, then agent_id. */
  async listMembers(signal: AbortSignal, workspaceId: string): Promise<MemberRecord[]> {
    const { rows } = await this.db.query<MemberRow>(
      `SELECT ${MEMBER_COLUMNS} FROM members WHERE workspace_id = $1 ORDER BY added_at, agent_id`,
      [workspaceId],
      signal,
    );
    return rows.map(toMember);
  }

  /** Every membership of the agent with its workspace, ordered by workspace created_at, then id. */
  async listMemberships(signal: AbortSignal, agentId: string): Promise<MembershipRecord[]> {
    const { rows } = await this.db.query<WorkspaceRow & MemberRow>(
      `SELECT w.id, w.name, w.description, w.owner_agent_id, w.owner_tenant_id, w.created_at,
              m.workspace_id, m.agent_id, m.agent_name, m.tenant_id, m.role, m.added_by, m.added_at
         FROM members m JOIN workspaces w ON w.id = m.workspace_id
        WHERE m.agent_id = $1
        ORDER BY w.created_at, w.id`,
      [agentId],
      signal,
    );
    return rows.map((row) => ({ workspace: toWorkspace(row), member: toMember(row) }));
  }

  /**
   * Adds the member, or for an existing one updates its role and cached name (added_at stays, and
   * added_by unless `rebase`: then the membership rests on this adder's grant from now on).
   * Returns the stored member and whether it was new, or undefined when the workspace no longer
   * exists. `onCreated` is written only when the agent was not a member yet (a role change
   * announces nothing).
   */
  async upsertMember(
    signal: AbortSignal,
    member: MemberRecord,
    onCreated: (stored: MemberRecord) => OutboxEvent,
    options: { rebase?: boolean; maxMembers?: number } = {},
  ): Promise<{ member: MemberRecord; created: boolean } | 'full' | undefined> {
    return this.db.transaction(async (tx) => {
      // Holding the workspace row keeps a concurrent delete from slipping in between, and
      // concurrent adds from all passing the members quota (they take turns).
      const workspace = await tx.query('SELECT id FROM workspaces WHERE id = $1 FOR UPDATE', [member.workspaceId]);
      if (workspace.rows.length === 0) return undefined;
      if (options.maxMembers !== undefined) {
        // Counting stops at the quota; a member already in (a role change) needs no room.
        const { rows: counted } = await tx.query<{ n: number; present: boolean }>(
          `SELECT (SELECT count(*)::int FROM (SELECT 1 FROM members WHERE workspace_id = $1 LIMIT $3) s) AS n,
                  EXISTS (SELECT 1 FROM members WHERE workspace_id = $1 AND agent_id = $2) AS present`,
          [member.workspaceId, member.agentId, options.maxMembers],
        );
        if (!counted[0]!.present && counted[0]!.n >= options.maxMembers) return 'full';
      }
      // xmax is 0 only on a freshly inserted row version: the one way to tell insert from
      // update in a single race-free statement.
      const { rows } = await tx.query<MemberRow & { created: boolean }>(
        `INSERT INTO members (${MEMBER_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (workspace_id, agent_id) DO UPDATE SET role = EXCLUDED.role, agent_name = EXCLUDED.agent_name,
           added_by = CASE WHEN $8::boolean THEN EXCLUDED.added_by ELSE members.added_by END
         RETURNING ${MEMBER_COLUMNS}, (xmax = 0) AS created`,
        [...memberValues(member), options.rebase ?? false],
      );
      const row = rows[0] as MemberRow & { created: boolean };
      const stored = toMember(row);
      if (row.created) await appendEvent(tx, onCreated(stored));
      return { member: stored, created: row.created };
    }, signal);
  }

  /** False when the agent was not a member. */
  async removeMember(signal: AbortSignal, workspaceId: string, agentId: string, event: OutboxEvent): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      const { rowCount } = await tx.query('DELETE FROM members WHERE workspace_id = $1 AND agent_id = $2', [workspaceId, agentId]);
      if (rowCount > 0) await appendEvent(tx, event);
      return rowCount > 0;
    }, signal);
  }
}
