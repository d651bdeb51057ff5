import type { Queryable } from '@agenthub/runtime';

/**
 * A task's messages and artifacts, one `task_items` row each (migration 004): an append inserts
 * its rows instead of rewriting the task, and reads fetch only the history they return.
 */

export type ItemKind = 'message' | 'artifact';

/** One item serialized for its row. */
export interface SerializedItem {
  kind: ItemKind;
  itemId: string;
  body: string;
  /** UTF-8 bytes of `body`: what the task's byte limit counts. */
  bytes: number;
}

/** What a change appends to a task, as the limits see it. */
export interface TaskGrowth {
  messages: number;
  artifacts: number;
  bytes: number;
}

/** The items a task holds, in order. */
export interface TaskItems {
  messages: unknown[];
  artifacts: unknown[];
}

/** The ids of the items a task holds (messages by messageId, artifacts by id). */
export interface HeldIds {
  messages: ReadonlySet<string>;
  artifacts: ReadonlySet<string>;
}

const idKey: Record<ItemKind, string> = { message: 'messageId', artifact: 'id' };

export function serializeItems(kind: ItemKind, items: unknown[]): SerializedItem[] {
  return items.map((item) => {
    const body = JSON.stringify(item);
    const id = (item as Record<string, unknown>)[idKey[kind]];
    return { kind, itemId: typeof id === 'string' ? id : '', body, bytes: Buffer.byteLength(body) };
  });
}

export function growthOf(items: SerializedItem[]): TaskGrowth {
  let messages = 0;
  let bytes = 0;
  for (const item of items) {
    if (item.kind === 'message') messages += 1;
    bytes += item.bytes;
  }
  return { messages, artifacts: items.length - messages, bytes };
}

/** Inserts the items after the task's `messageCount` messages and `artifactCount` artifacts, in one statement. */
export async function appendItems(
  tx: Queryable,
  taskId: string,
  held: { messageCount: number; artifactCount: number },
  items: SerializedItem[],
): Promise<void> {
  if (!items.length) return;
  const next = { message: held.messageCount, artifact: held.artifactCount };
  const seqs = items.map((item) => next[item.kind]++);
  await tx.query(
    `INSERT INTO task_items (task_id, kind, seq, item_id, body, bytes)
     SELECT $1, x.kind, x.seq, x.item_id, x.body::jsonb, x.bytes
       FROM unnest($2::text[], $3::int[], $4::text[], $5::text[], $6::int[]) AS x (kind, seq, item_id, body, bytes)`,
    [taskId, items.map((i) => i.kind), seqs, items.map((i) => i.itemId), items.map((i) => i.body), items.map((i) => i.bytes)],
  );
}

export interface ItemSelection {
  /** The last this many messages of each task; undefined: all. */
  historyLength?: number;
  /** Whether to read artifacts at all. */
  artifacts: boolean;
}

/** The items of the tasks, each task's messages limited to its last `historyLength`, in one query. */
export async function loadItems(q: Queryable, taskIds: string[], select: ItemSelection, signal?: AbortSignal): Promise<Map<string, TaskItems>> {
  const items = new Map<string, TaskItems>(taskIds.map((id) => [id, { messages: [], artifacts: [] }]));
  const wantMessages = select.historyLength === undefined || select.historyLength > 0;
  if (!taskIds.length || (!wantMessages && !select.artifacts)) return items;
  const { rows } = await q.query<{ task_id: string; kind: ItemKind; body: unknown }>(
    `SELECT i.task_id, i.kind, i.body FROM task_items i JOIN tasks t ON t.id = i.task_id
      WHERE i.task_id = ANY($1::text[])
        AND ((i.kind = 'message' AND $2::boolean AND i.seq >= t.message_count - $3::integer) OR (i.kind = 'artifact' AND $4::boolean))
      ORDER BY i.task_id, i.kind, i.seq`,
    [taskIds, wantMessages, select.historyLength ?? 2_147_483_647, select.artifacts],
    signal,
  );
  for (const row of rows) {
    const body = typeof row.body === 'string' ? (JSON.parse(row.body) as unknown) : row.body;
    const held = items.get(row.task_id)!;
    (row.kind === 'message' ? held.messages : held.artifacts).push(body);
  }
  return items;
}

export async function heldIds(q: Queryable, taskId: string): Promise<HeldIds> {
  const { rows } = await q.query<{ kind: ItemKind; item_id: string }>(
    "SELECT kind, item_id FROM task_items WHERE task_id = $1 AND item_id <> ''",
    [taskId],
  );
  return heldIdsOf(rows.map((row) => [row.kind, row.item_id]));
}

/** The held ids of (kind, item id) pairs. */
export function heldIdsOf(pairs: Iterable<readonly [ItemKind, string]>): HeldIds {
  const held = { messages: new Set<string>(), artifacts: new Set<string>() };
  for (const [kind, itemId] of pairs) (kind === 'message' ? held.messages : held.artifacts).add(itemId);
  return held;
}
