import { z } from 'zod';
import { workspacev1 } from '@agenthub/proto';
import { route, type Clients, type Route } from '../route.js';
import { field } from '../params.js';
import { memoryView } from '../views.js';

/** The memory types of the interface specification. */
const memoryType = z.enum(['fact', 'decision', 'preference', 'todo', 'context', 'reference']);
const content = z.string().trim().min(1).max(4000);
const tags = z.array(z.string().trim().min(1).max(64)).max(20);
const memoryId = z.string().min(1).max(128);
const threshold = z.number().min(0).max(1);
const limit = (max: number) => z.number().int().min(1).max(max);

/**
 * Optional filters of query, forget and memories: `type` (one type or several), `tags` with
 * `tag_match` (`any`, the default, or `all`), and `created_after` (inclusive) / `created_before`
 * (exclusive) in epoch milliseconds.
 */
const filterParams = {
  type: z.preprocess((v) => (typeof v === 'string' ? [v] : v), z.array(memoryType).max(6)).optional(),
  tags: tags.optional(),
  tag_match: z.enum(['any', 'all']).optional(),
  created_after: z.number().int().min(0).optional(),
  created_before: z.number().int().min(0).optional(),
};

type FilterParams = { type?: string[]; tags?: string[]; tag_match?: 'any' | 'all'; created_after?: number; created_before?: number };

function filterOf(p: FilterParams) {
  return {
    types: p.type ?? [],
    tags: p.tags ?? [],
    tagMatch: p.tag_match === 'all' ? workspacev1.TagMatch.ALL : workspacev1.TagMatch.ANY,
    ...(p.created_after !== undefined ? { createdAfter: BigInt(p.created_after) } : {}),
    ...(p.created_before !== undefined ? { createdBefore: BigInt(p.created_before) } : {}),
  };
}

/** Memories (`x-hub/workspace.store|query|update|forget|memories`); defaults and maximums in the README. */
export function memoryMethods(clients: Clients): [string, Route][] {
  const ws = workspacev1.WorkspaceService;
  return [
    ['x-hub/workspace.store', route(clients, ws, 'storeMemory', {
      params: z.object({ workspace_id: field.workspaceId, content, type: memoryType.optional(), tags: tags.optional() }),
      request: (p) => ({ workspaceId: p.workspace_id, content: p.content, type: p.type ?? '', tags: p.tags ?? [] }),
      result: (r) => ({ memory: memoryView(r.memory), duplicate: r.duplicate, updated: r.updated }),
    })],
    ['x-hub/workspace.query', route(clients, ws, 'queryMemories', {
      params: z.object({ workspace_id: field.workspaceId, query: content, limit: limit(100).optional(), threshold: threshold.optional(), ...filterParams }),
      request: (p) => ({ workspaceId: p.workspace_id, query: p.query, limit: p.limit, threshold: p.threshold, filter: filterOf(p) }),
      result: (r) => ({ memories: r.memories.map((m) => memoryView(m, { score: true })), count: r.memories.length, model: r.model }),
    })],
    ['x-hub/workspace.update', route(clients, ws, 'updateMemory', {
      params: z.object({ workspace_id: field.workspaceId, id: memoryId, content: content.optional(), tags: tags.optional() }),
      request: (p) => ({ workspaceId: p.workspace_id, id: p.id, content: p.content, ...(p.tags ? { tags: { tags: p.tags } } : {}) }),
      result: (r) => ({ memory: memoryView(r.memory), reembedded: r.reembedded }),
    })],
    ['x-hub/workspace.forget', route(clients, ws, 'forgetMemories', {
      params: z.object({
        workspace_id: field.workspaceId,
        id: memoryId.optional(),
        query: content.optional(),
        limit: limit(100).optional(),
        threshold: threshold.optional(),
        dry_run: z.boolean().optional(),
        ...filterParams,
      }),
      request: (p) => ({
        workspaceId: p.workspace_id,
        id: p.id ?? '',
        query: p.query ?? '',
        limit: p.limit,
        threshold: p.threshold,
        dryRun: p.dry_run ?? false,
        filter: filterOf(p),
      }),
      result: (r) => {
        const ids = r.memories.map((m) => m.id);
        const memories = r.memories.map((m) => memoryView(m, { score: true }));
        return r.dryRun
          ? { dry_run: true, deleted: 0, deleted_ids: [], would_delete_ids: ids, memories }
          : { dry_run: false, deleted: ids.length, deleted_ids: ids, memories };
      },
    })],
    ['x-hub/workspace.memories', route(clients, ws, 'listMemories', {
      params: z.object({ workspace_id: field.workspaceId, limit: limit(200).optional(), offset: z.number().int().min(0).max(1_000_000).optional(), ...filterParams }),
      request: (p) => ({ workspaceId: p.workspace_id, limit: p.limit, offset: p.offset, filter: filterOf(p) }),
      result: (r) => ({
        memories: r.memories.map((m) => memoryView(m)),
        count: r.memories.length,
        total: r.total,
        limit: r.limit,
        offset: r.offset,
        has_more: r.offset + r.memories.length < r.total,
      }),
    })],
  ];
}
