import { appendEvent, WORKSPACE_EVENTS_TOPIC, type Db, type Queryable } from '@agenthub/runtime';
import type { WrappedKey } from './keys.js';
import type { Sealed } from './seal.js';

/** A workspace's data key as stored: wrapped, never in the clear. */
export interface KeyRecord {
  workspaceId: string;
  generation: number;
  wrapped: WrappedKey;
  createdAt: number;
  rotatedAt: number;
}

export interface SecretInfoRecord {
  key: string;
  createdAt: number;
  updatedAt: number;
}

export interface SealedSecretRecord extends SecretInfoRecord {
  keyGeneration: number;
  sealed: Sealed;
}

interface KeyRow {
  workspace_id: string;
  generation: number;
  kek_version: string;
  wrapped_key: Uint8Array;
  created_at: number;
  rotated_at: number;
}

interface SecretRow {
  key: string;
  key_generation: number;
  nonce: Uint8Array;
  ciphertext: Uint8Array;
  created_at: number;
  updated_at: number;
}

/** bytea arrives as a Buffer from pg and as a Uint8Array from PGlite. */
function buffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function toKey(row: KeyRow): KeyRecord {
  return {
    workspaceId: row.workspace_id,
    generation: row.generation,
    wrapped: { kekVersion: row.kek_version, wrapped: buffer(row.wrapped_key) },
    createdAt: row.created_at,
    rotatedAt: row.rotated_at,
  };
}

function toSealed(row: SecretRow): SealedSecretRecord {
  return {
    key: row.key,
    keyGeneration: row.key_generation,
    sealed: { nonce: buffer(row.nonce), ciphertext: buffer(row.ciphertext) },
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

const KEY_COLUMNS = 'workspace_id, generation, kek_version, wrapped_key, created_at, rotated_at';

/** All SQL of the secrets service, in its own schema. */
export class SecretsStore {
  constructor(readonly db: Db) {}

  /** Secrets per workspace, for those of `workspaceIds` holding any. */
  async secretCounts(signal: AbortSignal, workspaceIds: readonly string[]): Promise<Map<string, number>> {
    const { rows } = await this.db.query<{ workspace_id: string; n: number }>(
      'SELECT workspace_id, count(*)::int AS n FROM secrets WHERE workspace_id = ANY($1::text[]) GROUP BY workspace_id',
      [workspaceIds],
      signal,
    );
    return new Map(rows.map((r) => [r.workspace_id, r.n]));
  }

  async getKey(signal: AbortSignal, workspaceId: string, tx: Queryable = this.db): Promise<KeyRecord | undefined> {
    const { rows } = await tx.query<KeyRow>(`SELECT ${KEY_COLUMNS} FROM workspace_keys WHERE workspace_id = $1`, [workspaceId], signal);
    return rows[0] && toKey(rows[0]);
  }

  /** Inserts the workspace's first data key; undefined when another call inserted one first. */
  async insertKey(signal: AbortSignal, workspaceId: string, wrapped: WrappedKey, now: number): Promise<KeyRecord | undefined> {
    const { rows } = await this.db.query<KeyRow>(
      `INSERT INTO workspace_keys (${KEY_COLUMNS}) VALUES ($1, 1, $2, $3, $4, $4)
       ON CONFLICT (workspace_id) DO NOTHING RETURNING ${KEY_COLUMNS}`,
      [workspaceId, wrapped.kekVersion, wrapped.wrapped, now],
      signal,
    );
    return rows[0] && toKey(rows[0]);
  }

  /** One secret and its workspace's data key, read in one statement (one consistent snapshot). */
  async getSecret(signal: AbortSignal, workspaceId: string, key: string): Promise<{ secret: SealedSecretRecord; dataKey: KeyRecord } | undefined> {
    const { rows } = await this.db.query<SecretRow & KeyRow>(
      `SELECT s.key, s.key_generation, s.nonce, s.ciphertext, s.created_at, s.updated_at,
              k.workspace_id, k.generation, k.kek_version, k.wrapped_key,
              k.created_at AS key_created_at, k.rotated_at
         FROM secrets s JOIN workspace_keys k ON k.workspace_id = s.workspace_id
        WHERE s.workspace_id = $1 AND s.key = $2`,
      [workspaceId, key],
      signal,
    );
    const row = rows[0] as (SecretRow & KeyRow & { key_created_at: number }) | undefined;
    if (!row) return undefined;
    return { secret: toSealed(row), dataKey: toKey({ ...row, created_at: row.key_created_at }) };
  }

  /** Keys and timestamps, ordered by key; no ciphertext is read. */
  async listSecrets(signal: AbortSignal, workspaceId: string): Promise<SecretInfoRecord[]> {
    const { rows } = await this.db.query<{ key: string; created_at: number; updated_at: number }>(
      'SELECT key, created_at, updated_at FROM secrets WHERE workspace_id = $1 ORDER BY key',
      [workspaceId],
      signal,
    );
    return rows.map((row) => ({ key: row.key, createdAt: row.created_at, updatedAt: row.updated_at }));
  }

  /**
   * Stores a value sealed under data key `generation`, with its event, in one transaction.
   * `stale` when the workspace key was rotated (or destroyed: `gone`) since the caller read it,
   * so the caller seals again; `limited` when creating it would exceed `maxSecrets`.
   */
  async putSecret(signal: AbortSignal, input: {
    workspaceId: string;
    key: string;
    generation: number;
    sealed: Sealed;
    agentId: string;
    now: number;
    maxSecrets: number;
  }): Promise<{ status: 'stored'; secret: SecretInfoRecord; created: boolean } | { status: 'stale' | 'gone' | 'limited' }> {
    return this.db.transaction(async (tx) => {
      // FOR KEY SHARE keeps RotateWorkspaceKey (FOR UPDATE) out until this commits, while
      // RotateKek's rewrap (an UPDATE of non-key columns) goes on unhindered.
      const current = await tx.query<{ generation: number }>(
        'SELECT generation FROM workspace_keys WHERE workspace_id = $1 FOR KEY SHARE',
        [input.workspaceId],
      );
      const generation = current.rows[0]?.generation;
      if (generation === undefined) return { status: 'gone' as const };
      if (generation !== input.generation) return { status: 'stale' as const };
      const { rows } = await tx.query<{ created_at: number; updated_at: number; created: boolean }>(
        `INSERT INTO secrets (workspace_id, key, key_generation, nonce, ciphertext, created_at, updated_at, created_by, updated_by)
         VALUES ($1, $2, $3, $4, $5, $6, $6, $7, $7)
         ON CONFLICT (workspace_id, key) DO UPDATE
           SET key_generation = EXCLUDED.key_generation, nonce = EXCLUDED.nonce, ciphertext = EXCLUDED.ciphertext,
               updated_at = EXCLUDED.updated_at, updated_by = EXCLUDED.updated_by
         RETURNING created_at, updated_at, (xmax = 0) AS created`,
        [input.workspaceId, input.key, input.generation, input.sealed.nonce, input.sealed.ciphertext, input.now, input.agentId],
      );
      const row = rows[0]!;
      if (row.created) {
        const count = await tx.query<{ count: number }>('SELECT count(*)::int AS count FROM secrets WHERE workspace_id = $1', [input.workspaceId]);
        // Throwing rolls the insert back; the sentinel tells the caller why.
        if ((count.rows[0]?.count ?? 0) > input.maxSecrets) throw new LimitReached();
      }
      await appendEvent(tx, {
        topic: WORKSPACE_EVENTS_TOPIC,
        partitionKey: input.workspaceId,
        type: 'workspace.secret.set',
        data: { workspace_id: input.workspaceId, key: input.key, set_by: input.agentId },
      }, new Date(input.now));
      return {
        status: 'stored' as const,
        secret: { key: input.key, createdAt: row.created_at, updatedAt: row.updated_at },
        created: row.created,
      };
    }, signal).catch((err: unknown) => {
      if (err instanceof LimitReached) return { status: 'limited' as const };
      throw err;
    });
  }

  /** Deletes one secret with its event; false when there was none. */
  async deleteSecret(signal: AbortSignal, workspaceId: string, key: string, agentId: string): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      const { rowCount } = await tx.query('DELETE FROM secrets WHERE workspace_id = $1 AND key = $2', [workspaceId, key]);
      if (rowCount === 0) return false;
      await appendEvent(tx, {
        topic: WORKSPACE_EVENTS_TOPIC,
        partitionKey: workspaceId,
        type: 'workspace.secret.deleted',
        data: { workspace_id: workspaceId, key, deleted_by: agentId },
      });
      return true;
    }, signal);
  }

  /** Destroys the workspace's data key and, by cascade, its ciphertexts. */
  async destroyWorkspace(signal: AbortSignal, workspaceId: string): Promise<{ destroyed: boolean; secretsDeleted: number }> {
    return this.db.transaction(async (tx) => {
      const secrets = await tx.query('DELETE FROM secrets WHERE workspace_id = $1', [workspaceId]);
      const keys = await tx.query('DELETE FROM workspace_keys WHERE workspace_id = $1', [workspaceId]);
      return { destroyed: keys.rowCount > 0, secretsDeleted: secrets.rowCount };
    }, signal);
  }

  /**
   * Re-seals every value of a workspace under a new data key in one transaction. `reseal` gets
   * the current key (locked FOR UPDATE, so no set or other rotation interleaves) and each sealed
   * value, and returns the new wrapped key and the values sealed again; throwing leaves all as it was.
   */
  async rotateWorkspaceKey(
    signal: AbortSignal,
    workspaceId: string,
    reseal: (current: KeyRecord, secrets: SealedSecretRecord[]) => Promise<{ wrapped: WrappedKey; resealed: Map<string, Sealed> }>,
    now: number,
  ): Promise<{ generation: number; resealed: number } | undefined> {
    return this.db.transaction(async (tx) => {
      const locked = await tx.query<KeyRow>(`SELECT ${KEY_COLUMNS} FROM workspace_keys WHERE workspace_id = $1 FOR UPDATE`, [workspaceId]);
      if (!locked.rows[0]) return undefined;
      const current = toKey(locked.rows[0]);
      const { rows } = await tx.query<SecretRow>(
        'SELECT key, key_generation, nonce, ciphertext, created_at, updated_at FROM secrets WHERE workspace_id = $1 ORDER BY key',
        [workspaceId],
      );
      const { wrapped, resealed } = await reseal(current, rows.map(toSealed));
      const generation = current.generation + 1;
      for (const [key, sealed] of resealed) {
        await tx.query(
          'UPDATE secrets SET key_generation = $3, nonce = $4, ciphertext = $5 WHERE workspace_id = $1 AND key = $2',
          [workspaceId, key, generation, sealed.nonce, sealed.ciphertext],
        );
      }
      await tx.query(
        'UPDATE workspace_keys SET generation = $2, kek_version = $3, wrapped_key = $4, rotated_at = $5 WHERE workspace_id = $1',
        [workspaceId, generation, wrapped.kekVersion, wrapped.wrapped, now],
      );
      return { generation, resealed: resealed.size };
    }, signal);
  }

  /**
   * One batch of KEK rotation: up to `limit` data keys not yet wrapped under `kekVersion`, after
   * `afterId`, locked FOR NO KEY UPDATE (sets, which hold FOR KEY SHARE, are not blocked), each
   * rewrapped by `rewrap` and written back in the same transaction (`rewrap` returning undefined
   * leaves that key as it is). Returns the last id seen and the counts; `lastId` undefined when
   * no key was left.
   */
  async rewrapBatch(
    signal: AbortSignal,
    kekVersion: string,
    afterId: string,
    limit: number,
    rewrap: (key: KeyRecord) => Promise<WrappedKey | undefined>,
  ): Promise<{ lastId: string | undefined; rewrapped: number; failed: number }> {
    return this.db.transaction(async (tx) => {
      const { rows } = await tx.query<KeyRow>(
        `SELECT ${KEY_COLUMNS} FROM workspace_keys
          WHERE kek_version <> $1 AND workspace_id > $2
          ORDER BY workspace_id LIMIT $3 FOR NO KEY UPDATE`,
        [kekVersion, afterId, limit],
      );
      let rewrapped = 0;
      let failed = 0;
      for (const row of rows) {
        const key = toKey(row);
        // Re-read under the lock: a concurrent rotation may have moved it already.
        if (key.wrapped.kekVersion === kekVersion) continue;
        const wrapped = await rewrap(key);
        if (!wrapped) {
          failed += 1;
          continue;
        }
        await tx.query('UPDATE workspace_keys SET kek_version = $2, wrapped_key = $3 WHERE workspace_id = $1', [
          key.workspaceId,
          wrapped.kekVersion,
          wrapped.wrapped,
        ]);
        rewrapped += 1;
      }
      return { lastId: rows.at(-1)?.workspace_id, rewrapped, failed };
    }, signal);
  }

  async countKeys(signal: AbortSignal): Promise<{ total: number; byVersion: Record<string, number> }> {
    const { rows } = await this.db.query<{ kek_version: string; count: number }>(
      'SELECT kek_version, count(*)::int AS count FROM workspace_keys GROUP BY kek_version',
      [],
      signal,
    );
    const byVersion = Object.fromEntries(rows.map((r) => [r.kek_version, r.count]));
    return { total: rows.reduce((sum, r) => sum + r.count, 0), byVersion };
  }
}

class LimitReached extends Error {}
