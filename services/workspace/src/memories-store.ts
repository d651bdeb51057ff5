import type { Queryable } from '@agenthub/runtime';
import type { VectorFilter } from './vectors.js';

export interface MemoryRecord {
  id: string;
  workspaceId: string;
  content: string;
  type: string;
  tags: string[];
  /** The embedding model of the memory's vector. */
  model: string;
  createdAt: number;
  createdBy: string;
  updatedAt: number;
  updatedBy: string;
}

interface MemoryRow {
  id: string;
  workspace_id: string;
  content: string;
  type: string;
  tags: string[] | null;
  model: string;
  created_at: number | string;
  created_by: string;
  updated_at: number | string;
  updated_by: string;
}

const COLUMNS = 'id, workspace_id, content, type, tags, model, created_at, created_by, updated_at, updated_by';

function toMemory(row: MemoryRow): MemoryRecord {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    content: row.content,
    type: row.type,
    tags: row.tags ?? [],
    model: row.model,
    createdAt: Number(row.created_at),
    createdBy: row.created_by,
    updatedAt: Number(row.updated_at),
    updatedBy: row.updated_by,
  };
}

/** SQL conditions and parameters for a filter, numbered from `first`. */
function where(filter: VectorFilter | undefined, first: number): { sql: string; params: unknown[] } {
  const parts: string[] = [];
  const params: unknown[] = [];
  const param = (value: unknown) => {
    params.push(value);
    return `$${first + params.length - 1}`;
  };
  if (filter?.types?.length) parts.push(`type = ANY(${param([...filter.types])}::text[])`);
  if (filter?.tags?.length) parts.push(`tags ${filter.tagMatch === 'all' ? '@>' : '&&'} ${param([...filter.tags])}::text[]`);
  if (filter?.createdAfter !== undefined) parts.push(`created_at >= ${param(filter.createdAfter)}`);
  if (filter?.createdBefore !== undefined) parts.push(`created_at < ${param(filter.createdBefore)}`);
  return { sql: parts.map((p) => ` AND ${p}`).join(''), params };
}

/** All SQL of memories, each statement on the connection or transaction it is given. */
export const memorySql = {
  async get(q: Queryable, signal: AbortSignal, workspaceId: string, id: string, options: { lock?: boolean } = {}): Promise<MemoryRecord | undefined> {
    const { rows } = await q.query<MemoryRow>(
      `SELECT ${COLUMNS} FROM memories WHERE workspace_id = $1 AND id = $2${options.lock ? ' FOR UPDATE' : ''}`,
      [workspaceId, id],
      signal,
    );
    return rows[0] && toMemory(rows[0]);
  },

  async byContent(q: Queryable, signal: AbortSignal, workspaceId: string, contentSha256: string): Promise<MemoryRecord | undefined> {
    const { rows } = await q.query<MemoryRow>(`SELECT ${COLUMNS} FROM memories WHERE workspace_id = $1 AND content_sha256 = $2`, [
      workspaceId,
      contentSha256,
    ], signal);
    return rows[0] && toMemory(rows[0]);
  },

  /** The memories among `ids` that exist, by id. */
  async many(q: Queryable, signal: AbortSignal, workspaceId: string, ids: readonly string[]): Promise<Map<string, MemoryRecord>> {
    if (ids.length === 0) return new Map();
    const { rows } = await q.query<MemoryRow>(`SELECT ${COLUMNS} FROM memories WHERE workspace_id = $1 AND id = ANY($2::text[])`, [
      workspaceId,
      [...ids],
    ], signal);
    return new Map(rows.map((row) => [row.id, toMemory(row)]));
  },

  /**
   * How many memories the workspace holds and their content's bytes, under a lock that holds
   * other stores into the workspace back until this transaction ends (so a quota check holds).
   */
  async usageLocked(q: Queryable, signal: AbortSignal, workspaceId: string): Promise<{ count: number; bytes: number }> {
    await q.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`memories:${workspaceId}`], signal);
    const { rows } = await q.query<{ count: number; bytes: string | number }>(
      'SELECT count(*)::int AS count, coalesce(sum(octet_length(content)), 0)::bigint AS bytes FROM memories WHERE workspace_id = $1',
      [workspaceId],
      signal,
    );
    return { count: rows[0]?.count ?? 0, bytes: Number(rows[0]?.bytes ?? 0) };
  },

  /** Inserts the memory unless the workspace holds its content already (then returns false). */
  async insert(q: Queryable, signal: AbortSignal, memory: MemoryRecord, contentSha256: string): Promise<boolean> {
    const { rows } = await q.query(
      `INSERT INTO memories (id, workspace_id, content, content_sha256, type, tags, model, created_at, created_by, updated_at, updated_by)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
       ON CONFLICT (workspace_id, content_sha256) DO NOTHING
       RETURNING id`,
      [memory.id, memory.workspaceId, memory.content, contentSha256, memory.type, memory.tags, memory.model, memory.createdAt, memory.createdBy, memory.updatedAt, memory.updatedBy],
      signal,
    );
    return rows.length > 0;
  },

  async update(q: Queryable, signal: AbortSignal, memory: MemoryRecord, contentSha256: string): Promise<void> {
    await q.query(
      `UPDATE memories SET content = $3, content_sha256 = $4, tags = $5, model = $6, updated_at = $7, updated_by = $8, type = $9
        WHERE workspace_id = $1 AND id = $2`,
      [memory.workspaceId, memory.id, memory.content, contentSha256, memory.tags, memory.model, memory.updatedAt, memory.updatedBy, memory.type],
      signal,
    );
  },

  /** Deletes the memories among `ids` that still exist and returns them. */
  async delete(q: Queryable, signal: AbortSignal, workspaceId: string, ids: readonly string[]): Promise<MemoryRecord[]> {
    if (ids.length === 0) return [];
    const { rows } = await q.query<MemoryRow>(`DELETE FROM memories WHERE workspace_id = $1 AND id = ANY($2::text[]) RETURNING ${COLUMNS}`, [
      workspaceId,
      [...ids],
    ], signal);
    return rows.map(toMemory);
  },

  /** One page, oldest first (created_at, then id), and the number of memories the filter admits. */
  async list(q: Queryable, signal: AbortSignal, workspaceId: string, filter: VectorFilter | undefined, limit: number, offset: number): Promise<{ memories: MemoryRecord[]; total: number }> {
    const w = where(filter, 2);
    const count = await q.query<{ total: number | string }>(`SELECT count(*) AS total FROM memories WHERE workspace_id = $1${w.sql}`, [workspaceId, ...w.params], signal);
    const { rows } = await q.query<MemoryRow>(
      `SELECT ${COLUMNS} FROM memories WHERE workspace_id = $1${w.sql}
        ORDER BY created_at, id LIMIT ${limit} OFFSET ${offset}`,
      [workspaceId, ...w.params],
      signal,
    );
    return { memories: rows.map(toMemory), total: Number(count.rows[0]?.total ?? 0) };
  },

  /** Memories embedded with another model than `model`, oldest first. */
  async staleBatch(q: Queryable, signal: AbortSignal, workspaceId: string, model: string, size: number): Promise<MemoryRecord[]> {
    const { rows } = await q.query<MemoryRow>(
      `SELECT ${COLUMNS} FROM memories WHERE workspace_id = $1 AND model <> $2 ORDER BY created_at, id LIMIT ${size}`,
      [workspaceId, model],
      signal,
    );
    return rows.map(toMemory);
  },

  async countStale(q: Queryable, signal: AbortSignal, workspaceId: string, model: string): Promise<number> {
    const { rows } = await q.query<{ n: number | string }>('SELECT count(*) AS n FROM memories WHERE workspace_id = $1 AND model <> $2', [workspaceId, model], signal);
    return Number(rows[0]?.n ?? 0);
  },

  async models(q: Queryable, signal: AbortSignal, workspaceId: string): Promise<string[]> {
    const { rows } = await q.query<{ model: string }>('SELECT DISTINCT model FROM memories WHERE workspace_id = $1', [workspaceId], signal);
    return rows.map((r) => r.model);
  },

  /** Records that the memory's vector now comes from `model`, unless its content changed meanwhile. */
  async setModel(q: Queryable, signal: AbortSignal, workspaceId: string, id: string, model: string, contentSha256: string): Promise<boolean> {
    const { rowCount } = await q.query('UPDATE memories SET model = $3 WHERE workspace_id = $1 AND id = $2 AND content_sha256 = $4', [
      workspaceId,
      id,
      model,
      contentSha256,
    ], signal);
    return rowCount > 0;
  },
};
