import type { Queryable } from '@agenthub/runtime';

/** One memory's vector with the fields searches filter on. */
export interface VectorPoint {
  /** The memory id (`wmem_…`). */
  id: string;
  workspaceId: string;
  /** The embedding model that produced `vector`; searches only compare vectors of one model. */
  model: string;
  /** L2-normalised. */
  vector: Float32Array;
  type: string;
  tags: readonly string[];
  createdAt: number;
}

export interface VectorFilter {
  /** Any of these types; empty or absent means every type. */
  types?: readonly string[];
  tags?: readonly string[];
  /** `any` (default): at least one of `tags`; `all`: every one of them. */
  tagMatch?: 'any' | 'all';
  /** Epoch ms, inclusive. */
  createdAfter?: number;
  /** Epoch ms, exclusive. */
  createdBefore?: number;
}

export interface VectorSearch {
  workspaceId: string;
  model: string;
  vector: Float32Array;
  limit: number;
  /** Hits scoring below it are left out; 0 keeps every hit. */
  threshold: number;
  filter?: VectorFilter;
}

export interface VectorHit {
  id: string;
  /** Cosine similarity clamped to [0, 1]; higher is better. */
  score: number;
}

export interface WriteOptions {
  /**
   * The relational transaction the change belongs to. A transactional store writes through it,
   * so the change commits or rolls back with the memory rows; others ignore it.
   */
  tx?: Queryable;
  signal?: AbortSignal;
}

/**
 * Where memory vectors live and are searched: `EmbeddedVectorStore` (exact search over vectors
 * in the workspace schema) or `QdrantVectorStore`. Every call names its workspace and touches
 * nothing of another. The relational rows stay the truth: readers drop hits whose memory is gone.
 */
export interface VectorStore {
  readonly name: 'embedded' | 'qdrant';
  /** Whether writes given `tx` commit and roll back with it. */
  readonly transactional: boolean;
  /** Inserts or replaces points (by workspace, model and id). */
  upsert(points: readonly VectorPoint[], options?: WriteOptions): Promise<void>;
  /** Replaces the tags of a memory's points, under every model. */
  setTags(workspaceId: string, id: string, tags: readonly string[], options?: WriteOptions): Promise<void>;
  /** Deletes the memories' points under every model. */
  delete(workspaceId: string, ids: readonly string[], options?: WriteOptions): Promise<void>;
  /** Deletes every point of the workspace, or those of every model but `keepModel`. */
  deleteWorkspace(workspaceId: string, options?: WriteOptions & { keepModel?: string }): Promise<void>;
  /**
   * The `limit` best points of one workspace and model passing the filter and the threshold,
   * best first (ties by id).
   */
  search(query: VectorSearch, options?: { signal?: AbortSignal }): Promise<VectorHit[]>;
}

/** Cosine of two unit vectors as a score in [0, 1]. */
export function scoreOf(cosine: number): number {
  return cosine <= 0 ? 0 : cosine >= 1 ? 1 : cosine;
}

/** Whether a point's fields pass the filter (the embedded store's predicate; Qdrant's mirrors it). */
export function matches(filter: VectorFilter | undefined, type: string, tags: readonly string[], createdAt: number): boolean {
  if (!filter) return true;
  if (filter.types && filter.types.length > 0 && !filter.types.includes(type)) return false;
  if (filter.tags && filter.tags.length > 0) {
    const ok = filter.tagMatch === 'all' ? filter.tags.every((t) => tags.includes(t)) : filter.tags.some((t) => tags.includes(t));
    if (!ok) return false;
  }
  if (filter.createdAfter !== undefined && createdAt < filter.createdAfter) return false;
  if (filter.createdBefore !== undefined && createdAt >= filter.createdBefore) return false;
  return true;
}
