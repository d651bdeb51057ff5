import { endianness } from 'node:os';
import type { Db, Queryable } from '@agenthub/runtime';
import { matches, scoreOf, type VectorHit, type VectorPoint, type VectorSearch, type VectorStore, type WriteOptions } from './vectors.js';
import { Scanner, TopK } from './vectors-scan.js';

/**
 * Exact k-NN over vectors kept in the workspace schema (`memory_vectors`, migration 002), for
 * deployments without Qdrant. Writes go through the caller's transaction, so vectors commit
 * with their memories. Searches scan every vector of the workspace and model in memory: each
 * (workspace, model) set is cached in this process and checked against its generation row on
 * every search, so changes made by any replica are seen by the next search.
 */
export class EmbeddedVectorStore implements VectorStore {
  readonly name = 'embedded' as const;
  readonly transactional = true;
  private readonly cache = new Map<string, CachedSet>();
  private cachedBytes = 0;
  private readonly cacheBytes: number;

  constructor(
    private readonly db: Db,
    options: { /** Memory for cached vector sets, least recently searched evicted first. */ cacheBytes?: number } = {},
  ) {
    this.cacheBytes = options.cacheBytes ?? 256 * 1024 * 1024;
  }

  async upsert(points: readonly VectorPoint[], options: WriteOptions = {}): Promise<void> {
    if (points.length === 0) return;
    await this.write(options, async (q) => {
      // One statement per point: move the set's generation and write the row stamped with it.
      for (const point of points) {
        await q.query(
          `WITH g AS (${BUMP_SQL})
           INSERT INTO memory_vectors (workspace_id, model, memory_id, dimensions, vector, type, tags, created_at, generation)
           SELECT $1, $2, $3, $4::integer, $5::bytea, $6, $7::text[], $8::bigint, g.generation FROM g
           ON CONFLICT (workspace_id, model, memory_id) DO UPDATE SET
             dimensions = EXCLUDED.dimensions, vector = EXCLUDED.vector, type = EXCLUDED.type,
             tags = EXCLUDED.tags, created_at = EXCLUDED.created_at, generation = EXCLUDED.generation`,
          [point.workspaceId, point.model, point.id, point.vector.length, encode(point.vector), point.type, [...point.tags], point.createdAt],
        );
      }
    });
  }

  async setTags(workspaceId: string, id: string, tags: readonly string[], options: WriteOptions = {}): Promise<void> {
    await this.write(options, async (q) => {
      const { rows } = await q.query<{ model: string }>('SELECT model FROM memory_vectors WHERE workspace_id = $1 AND memory_id = $2', [workspaceId, id]);
      for (const { model } of rows) {
        const generation = await bump(q, workspaceId, model);
        await q.query(
          'UPDATE memory_vectors SET tags = $4, generation = $5 WHERE workspace_id = $1 AND model = $2 AND memory_id = $3',
          [workspaceId, model, id, [...tags], generation],
        );
      }
    });
  }

  async delete(workspaceId: string, ids: readonly string[], options: WriteOptions = {}): Promise<void> {
    if (ids.length === 0) return;
    await this.write(options, async (q) => {
      const { rows } = await q.query<{ model: string }>(
        'DELETE FROM memory_vectors WHERE workspace_id = $1 AND memory_id = ANY($2::text[]) RETURNING model',
        [workspaceId, [...ids]],
      );
      for (const model of new Set(rows.map((r) => r.model))) await bump(q, workspaceId, model);
    });
  }

  async deleteWorkspace(workspaceId: string, options: WriteOptions & { keepModel?: string } = {}): Promise<void> {
    await this.write(options, async (q) => {
      // Generation rows go too: values come from a sequence, so a set created later can never
      // repeat a generation a cache still holds.
      if (options.keepModel === undefined) {
        await q.query('DELETE FROM memory_vectors WHERE workspace_id = $1', [workspaceId]);
        await q.query('DELETE FROM memory_vector_generations WHERE workspace_id = $1', [workspaceId]);
      } else {
        await q.query('DELETE FROM memory_vectors WHERE workspace_id = $1 AND model <> $2', [workspaceId, options.keepModel]);
        await q.query('DELETE FROM memory_vector_generations WHERE workspace_id = $1 AND model <> $2', [workspaceId, options.keepModel]);
      }
    });
  }

  async search(query: VectorSearch, options: { signal?: AbortSignal } = {}): Promise<VectorHit[]> {
    const set = await this.load(query.workspaceId, query.model, options.signal);
    if (!set || query.limit <= 0) return [];
    if (set.dims !== query.vector.length) return [];
    const top = new TopK(query.limit);
    const scores = set.dots(query.vector);
    const filter = query.filter;
    for (let i = 0; i < set.size; i++) {
      if (filter && !matches(filter, set.types[i]!, set.tags[i]!, set.createdAt[i]!)) continue;
      const score = scoreOf(scores[i]!);
      if (score < query.threshold) continue;
      top.offer(set.ids[i]!, score);
    }
    return top.hits();
  }

  private async write(options: WriteOptions, work: (q: Queryable) => Promise<void>): Promise<void> {
    if (options.tx) await work(options.tx);
    else await this.db.transaction(work, options.signal);
  }

  /** The current vector set of a workspace and model: cached, refreshed, or loaded. */
  private async load(workspaceId: string, model: string, signal: AbortSignal | undefined): Promise<CachedSet | undefined> {
    const key = keyOf(workspaceId, model);
    const { rows } = await this.db.query<{ generation: number | string }>(
      'SELECT generation FROM memory_vector_generations WHERE workspace_id = $1 AND model = $2',
      [workspaceId, model],
      signal,
    );
    let cached = this.cache.get(key);
    if (!rows[0]) {
      if (cached) this.evict(key, cached);
      return undefined;
    }
    const generation = Number(rows[0].generation);
    if (cached && cached.generation === generation) {
      // Most recently used last.
      this.cache.delete(key);
      this.cache.set(key, cached);
      return cached;
    }
    if (cached && cached.generation < generation) {
      const changed = await this.db.query<VectorRow>(
        `SELECT memory_id, vector, type, tags, created_at FROM memory_vectors
          WHERE workspace_id = $1 AND model = $2 AND generation > $3`,
        [workspaceId, model, cached.generation],
        signal,
      );
      const before = cached.bytes();
      for (const row of changed.rows) cached.put(row);
      const count = await this.db.query<{ count: number | string }>(
        'SELECT count(*) AS count FROM memory_vectors WHERE workspace_id = $1 AND model = $2',
        [workspaceId, model],
        signal,
      );
      this.cachedBytes += cached.bytes() - before;
      // Deletions leave no row behind: a size that no longer matches means some happened.
      if (cached.size === Number(count.rows[0]?.count ?? 0)) {
        cached.generation = generation;
        this.cache.delete(key);
        this.cache.set(key, cached);
        this.trim();
        return cached;
      }
    }
    if (cached) this.evict(key, cached);
    const all = await this.db.query<VectorRow>(
      'SELECT memory_id, vector, type, tags, created_at FROM memory_vectors WHERE workspace_id = $1 AND model = $2',
      [workspaceId, model],
      signal,
    );
    if (all.rows.length === 0) return undefined;
    cached = new CachedSet(generation, decode(all.rows[0]!.vector).length, all.rows.length);
    for (const row of all.rows) cached.put(row);
    if (cached.bytes() <= this.cacheBytes) {
      this.cache.set(key, cached);
      this.cachedBytes += cached.bytes();
      this.trim();
    }
    return cached;
  }

  private evict(key: string, set: CachedSet): void {
    if (this.cache.get(key) !== set) return;
    this.cache.delete(key);
    this.cachedBytes -= set.bytes();
  }

  private trim(): void {
    for (const [key, set] of this.cache) {
      if (this.cachedBytes <= this.cacheBytes) break;
      this.evict(key, set);
    }
  }
}

interface VectorRow {
  memory_id: string;
  vector: Uint8Array;
  type: string;
  tags: string[];
  created_at: number | string;
}

/** One workspace's vectors of one model, packed for scanning. */
class CachedSet {
  size = 0;
  ids: string[] = [];
  types: string[] = [];
  tags: (readonly string[])[] = [];
  createdAt: number[] = [];
  private capacity: number;
  private readonly slots = new Map<string, number>();
  private readonly scan: Scanner;

  constructor(
    public generation: number,
    readonly dims: number,
    capacity: number,
  ) {
    this.capacity = Math.max(16, capacity);
    this.scan = Scanner.create(dims, this.capacity);
  }

  put(row: VectorRow): void {
    const vector = decode(row.vector);
    if (vector.length !== this.dims) throw new Error(`Vector of ${vector.length} dimensions in a set of ${this.dims}`);
    let slot = this.slots.get(row.memory_id);
    if (slot === undefined) {
      slot = this.size++;
      this.slots.set(row.memory_id, slot);
      if (this.size > this.capacity) {
        this.capacity *= 2;
        this.scan.grow(this.capacity);
      }
    }
    this.ids[slot] = row.memory_id;
    this.types[slot] = row.type;
    this.tags[slot] = row.tags ?? [];
    this.createdAt[slot] = Number(row.created_at);
    this.scan.vectors().set(vector, slot * this.dims);
  }

  /** The query's dot product with every vector of the set, by slot. */
  dots(query: Float32Array): Float32Array {
    return this.scan.dots(query, this.size);
  }

  /** Roughly what the set holds in memory. */
  bytes(): number {
    return this.capacity * (this.dims * 4 + 4) + this.size * 160;
  }
}

function keyOf(workspaceId: string, model: string): string {
  return `${workspaceId}\u0000${model}`;
}

/**
 * Moves a set's generation past every value it had, inside the writer's transaction. Values
 * come from a sequence and only grow per row, so a search that cached generation g finds every
 * later change among rows with a greater generation.
 */
const BUMP_SQL = `INSERT INTO memory_vector_generations AS g (workspace_id, model, generation)
     VALUES ($1, $2, nextval('memory_vector_generation_seq'))
     ON CONFLICT (workspace_id, model) DO UPDATE SET generation = GREATEST(g.generation + 1, EXCLUDED.generation)
     RETURNING generation`;

async function bump(q: Queryable, workspaceId: string, model: string): Promise<number> {
  const { rows } = await q.query<{ generation: number | string }>(BUMP_SQL, [workspaceId, model]);
  return Number(rows[0]!.generation);
}

const LITTLE_ENDIAN = endianness() === 'LE';

/** Float32 little-endian, as stored in `memory_vectors.vector`. */
export function encode(vector: Float32Array): Buffer {
  if (LITTLE_ENDIAN) return Buffer.from(vector.buffer.slice(vector.byteOffset, vector.byteOffset + vector.byteLength));
  const out = Buffer.allocUnsafe(vector.length * 4);
  for (let i = 0; i < vector.length; i++) out.writeFloatLE(vector[i]!, i * 4);
  return out;
}

export function decode(bytes: Uint8Array): Float32Array {
  if (LITTLE_ENDIAN) return new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Float32Array(bytes.byteLength / 4);
  for (let i = 0; i < out.length; i++) out[i] = view.getFloat32(i * 4, true);
  return out;
}
