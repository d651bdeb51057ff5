import { createHash } from 'node:crypto';
import { QdrantClient } from '@qdrant/js-client-rest';
import { HubError, Reason, type Logger } from '@agenthub/runtime';
import { scoreOf, type VectorFilter, type VectorHit, type VectorPoint, type VectorSearch, type VectorStore, type WriteOptions } from './vectors.js';

export interface QdrantVectorStoreOptions {
  url: string;
  apiKey?: string;
  /** Collections are named `<prefix>_<model>_<hash>_<dimensions>`. */
  collectionPrefix?: string;
  /** Exact search instead of the HNSW index (the conformance suite compares exact results). */
  exact?: boolean;
  timeoutMs?: number;
  log?: Logger;
}

type Condition = Record<string, unknown>;

/**
 * Qdrant servers the pinned client (@qdrant/js-client-rest 1.18.0) works with, by its own rule:
 * the same major version and at most one minor version apart. The client's check is off because
 * it writes to the console; this store checks once and logs through ours.
 */
export const QDRANT_SUPPORTED = { major: 1, minors: [17, 19] as const };

/**
 * Vectors in Qdrant: one collection per embedding model and dimension, created on first use with
 * cosine distance and a keyword index on `workspace_id` marked `is_tenant` (plus indexes on
 * `type`, `tags` and `created_at`). Every read and write carries a `workspace_id` condition, so
 * one workspace never reaches another's points. Point ids are UUIDs derived from memory ids;
 * the memory id rides in the payload.
 */
export class QdrantVectorStore implements VectorStore {
  readonly name = 'qdrant' as const;
  readonly transactional = false;
  private readonly client: QdrantClient;
  private readonly prefix: string;
  private readonly ready = new Map<string, Promise<void>>();
  private versionChecked: Promise<string | undefined> | undefined;

  constructor(private readonly options: QdrantVectorStoreOptions) {
    this.client = new QdrantClient({
      url: options.url,
      ...(options.apiKey ? { apiKey: options.apiKey } : {}),
      timeout: options.timeoutMs ?? 10_000,
      checkCompatibility: false,
    });
    this.prefix = options.collectionPrefix ?? 'agenthub_memories';
  }

  /** The collection of one model and dimension. */
  collectionOf(model: string, dimensions: number): string {
    const slug = model.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '').slice(0, 60);
    const hash = createHash('sha256').update(model).digest('hex').slice(0, 8);
    return `${this.prefix}_${slug}_${hash}_${dimensions}`;
  }

  async upsert(points: readonly VectorPoint[]): Promise<void> {
    const byCollection = new Map<string, VectorPoint[]>();
    for (const point of points) {
      const name = this.collectionOf(point.model, point.vector.length);
      byCollection.set(name, [...(byCollection.get(name) ?? []), point]);
    }
    for (const [name, group] of byCollection) {
      await this.ensure(name, group[0]!.vector.length);
      await this.call(() =>
        this.client.upsert(name, {
          wait: true,
          points: group.map((point) => ({
            id: pointId(point.workspaceId, point.id),
            vector: Array.from(point.vector),
            payload: { workspace_id: point.workspaceId, memory_id: point.id, type: point.type, tags: [...point.tags], created_at: point.createdAt },
          })),
        }),
      );
    }
  }

  async setTags(workspaceId: string, id: string, tags: readonly string[]): Promise<void> {
    for (const name of await this.collections()) {
      await this.call(() =>
        this.client.setPayload(name, {
          wait: true,
          payload: { tags: [...tags] },
          filter: { must: [workspaceCondition(workspaceId), { has_id: [pointId(workspaceId, id)] }] },
        }),
      );
    }
  }

  async delete(workspaceId: string, ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    for (const name of await this.collections()) {
      await this.call(() =>
        this.client.delete(name, {
          wait: true,
          filter: { must: [workspaceCondition(workspaceId), { has_id: ids.map((id) => pointId(workspaceId, id)) }] },
        }),
      );
    }
  }

  async deleteWorkspace(workspaceId: string, options: WriteOptions & { keepModel?: string } = {}): Promise<void> {
    for (const name of await this.collections()) {
      if (options.keepModel !== undefined && this.isCollectionOf(name, options.keepModel)) continue;
      await this.call(() => this.client.delete(name, { wait: true, filter: { must: [workspaceCondition(workspaceId)] } }));
    }
  }

  async search(query: VectorSearch): Promise<VectorHit[]> {
    if (query.limit <= 0) return [];
    const name = this.collectionOf(query.model, query.vector.length);
    const must: Condition[] = [workspaceCondition(query.workspaceId), ...filterConditions(query.filter)];
    let response;
    try {
      response = await this.client.query(name, {
        query: Array.from(query.vector),
        limit: query.limit,
        filter: { must },
        with_payload: ['memory_id'],
        // Qdrant's cosine can be negative; scores clamp at 0, so a threshold of 0 keeps everything.
        ...(query.threshold > 0 ? { score_threshold: query.threshold } : {}),
        ...(this.options.exact ? { params: { exact: true } } : {}),
      });
    } catch (err) {
      if (statusOf(err) === 404) return [];
      throw this.unavailable(err);
    }
    const hits = response.points.map((point) => ({ id: String(point.payload?.memory_id ?? ''), score: scoreOf(point.score) }));
    return hits.filter((hit) => hit.id !== '').sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  /** Drops every collection of this store's prefix (tests). */
  async dropAll(): Promise<void> {
    for (const name of await this.collections()) await this.call(() => this.client.deleteCollection(name));
    this.ready.clear();
  }

  private isCollectionOf(name: string, model: string): boolean {
    const head = this.collectionOf(model, 0).replace(/_0$/, '_');
    return name.startsWith(head) && /^\d+$/.test(name.slice(head.length));
  }

  private async collections(): Promise<string[]> {
    const { collections } = await this.call(() => this.client.getCollections());
    return collections.map((c) => c.name).filter((name) => name.startsWith(`${this.prefix}_`));
  }

  /**
   * The server's version, checked against QDRANT_SUPPORTED once per store (before the first
   * collection is made): outside it, a warning names both versions; the store goes on, since the
   * calls it makes may still work. Undefined when the server does not say.
   */
  checkVersion(): Promise<string | undefined> {
    this.versionChecked ??= (async () => {
      let version: string | undefined;
      try {
        ({ version } = await this.client.versionInfo());
      } catch (err) {
        this.options.log?.warn({ err: (err as Error)?.message }, 'qdrant server version unknown');
        return undefined;
      }
      const [major, minor] = version.split('.').map(Number);
      const [low, high] = QDRANT_SUPPORTED.minors;
      if (major !== QDRANT_SUPPORTED.major || minor === undefined || !(minor >= low && minor <= high)) {
        this.options.log?.warn(
          { version, supported: `${QDRANT_SUPPORTED.major}.${low}-${QDRANT_SUPPORTED.major}.${high}` },
          'qdrant server version outside what the client supports',
        );
      }
      return version;
    })();
    return this.versionChecked;
  }

  /** Creates the collection and its payload indexes once per process (and tolerates a race). */
  private ensure(name: string, dimensions: number): Promise<void> {
    let ready = this.ready.get(name);
    if (!ready) {
      ready = (async () => {
        await this.checkVersion();
        const { exists } = await this.call(() => this.client.collectionExists(name));
        if (!exists) {
          try {
            await this.client.createCollection(name, { vectors: { size: dimensions, distance: 'Cosine' } });
          } catch (err) {
            if (statusOf(err) !== 409) throw this.unavailable(err);
          }
        }
        const indexes: [string, Record<string, unknown>][] = [
          ['workspace_id', { type: 'keyword', is_tenant: true }],
          ['type', { type: 'keyword' }],
          ['tags', { type: 'keyword' }],
          ['created_at', { type: 'integer' }],
        ];
        for (const [field, schema] of indexes) {
          await this.call(() =>
            this.client.createPayloadIndex(name, { wait: true, field_name: field, field_schema: schema as never }),
          );
        }
      })();
      ready.catch(() => this.ready.delete(name));
      this.ready.set(name, ready);
    }
    return ready;
  }

  private async call<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (err) {
      throw this.unavailable(err);
    }
  }

  private unavailable(err: unknown): HubError {
    if (err instanceof HubError) return err;
    this.options.log?.warn({ err: (err as Error)?.message, status: statusOf(err) }, 'qdrant call failed');
    return new HubError(Reason.UNAVAILABLE, 'The vector store is unavailable; retry later', { cause: err });
  }
}

function workspaceCondition(workspaceId: string): Condition {
  return { key: 'workspace_id', match: { value: workspaceId } };
}

/** The filter as Qdrant conditions, meaning what `matches` in vectors.ts means. */
export function filterConditions(filter: VectorFilter | undefined): Condition[] {
  if (!filter) return [];
  const must: Condition[] = [];
  if (filter.types && filter.types.length > 0) must.push({ key: 'type', match: { any: [...filter.types] } });
  if (filter.tags && filter.tags.length > 0) {
    if (filter.tagMatch === 'all') for (const tag of filter.tags) must.push({ key: 'tags', match: { value: tag } });
    else must.push({ key: 'tags', match: { any: [...filter.tags] } });
  }
  if (filter.createdAfter !== undefined || filter.createdBefore !== undefined) {
    must.push({
      key: 'created_at',
      range: {
        ...(filter.createdAfter !== undefined ? { gte: filter.createdAfter } : {}),
        ...(filter.createdBefore !== undefined ? { lt: filter.createdBefore } : {}),
      },
    });
  }
  return must;
}

/** A stable UUID for a memory's point (Qdrant ids are UUIDs or integers). */
export function pointId(workspaceId: string, memoryId: string): string {
  const hex = createHash('sha256').update(`${workspaceId}/${memoryId}`).digest('hex');
  // Shaped as a version 8 (custom) UUID.
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(13, 16)}-${((parseInt(hex[16]!, 16) & 0x3) | 0x8).toString(16)}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

function statusOf(err: unknown): number | undefined {
  const status = (err as { status?: unknown })?.status;
  return typeof status === 'number' ? status : undefined;
}
