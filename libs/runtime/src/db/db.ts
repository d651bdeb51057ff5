import { SpanKind, tracingOn, withSpan } from '../tracing.js';
/** A result the same whichever engine ran the statement. */
export interface QueryResult<R> {
  rows: R[];
  rowCount: number;
}

export interface Queryable {
  /**
   * Runs one statement. `signal` is the caller's: an aborted one starts nothing, and one aborted
   * while the statement runs cancels it on the server (PostgreSQL; PGlite only checks before).
   * Either way the call rejects with `abortError(signal)`. Inside a transaction, the
   * transaction's signal applies when none is given.
   */
  query<R = Record<string, unknown>>(sql: string, params?: readonly unknown[], signal?: AbortSignal): Promise<QueryResult<R>>;
  /** Runs a script of several statements without parameters (migrations). */
  exec(sql: string): Promise<void>;
  /**
   * Tells every listener of `channel` (Db.listen: this process's at once, on PostgreSQL other
   * processes' through pg_notify) `payload` once the transaction this belongs to commits, or at
   * once outside one; never for a transaction rolled back. Sent after the commit, so unlike a
   * pg_notify in the transaction it does not make commits wait for one another; repeats while one
   * is on its way go as one. Best effort: listeners keep a fallback (a poll).
   */
  notify(channel: string, payload: string): void;
}

export interface ListenOptions {
  standsInForOthers?: boolean;
}

/**
 * The relational store one service owns. Statements are plain PostgreSQL; every table lives in
 * the service's own schema, which is first on the search path.
 */
export interface Db extends Queryable {
  readonly engine: 'postgres' | 'pglite';
  /**
   * Runs `work` in one transaction: committed when it resolves, rolled back when it throws.
   * `signal` bounds the wait for a connection and every statement of `work`.
   */
  transaction<T>(work: (tx: Queryable) => Promise<T>, signal?: AbortSignal): Promise<T>;
  /** Runs `work` holding a session-level advisory lock, for one-at-a-time jobs such as migrations. */
  withAdvisoryLock<T>(name: string, work: (db: Queryable) => Promise<T>): Promise<T>;
  /**
   * Calls `onNotify` with the payload of every `notify` on `channel` (a plain lowercase
   * identifier) from any handle of the database (on PostgreSQL, from any process), once each,
   * until the returned function is called. Rejects when it cannot start listening. One sent while
   * a lost listening connection is being re-established is missed: callers keep a fallback poll.
   * With `standsInForOthers`, the listener does for its channel all that the listeners of other
   * processes would (the outbox relay: any replica's relay publishes every replica's rows), so
   * while it listens this handle's notifies on that channel reach it alone, without a pg_notify.
   */
  listen(channel: string, onNotify: (payload: string) => void, options?: ListenOptions): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

const UNIQUE_VIOLATION = '23505';

export function isUniqueViolation(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === UNIQUE_VIOLATION;
}

/** Schema names are interpolated into SQL, so only plain identifiers are accepted. */
export function assertIdentifier(name: string): string {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new Error(`Not a plain SQL identifier: ${name}`);
  return name;
}

/**
 * Runs one statement inside a client span when a traced call is running (background pollers make
 * none). The span carries the statement's SQL text, never its parameters.
 */
export function traceQuery<T>(sql: string, work: () => Promise<T>): Promise<T> {
  if (!tracingOn()) return work();
  const operation = /^\s*(\w+)/.exec(sql)?.[1]?.toUpperCase() ?? 'QUERY';
  return withSpan(
    operation,
    { kind: SpanKind.CLIENT, childOnly: true, attributes: { 'db.system.name': 'postgresql', 'db.operation.name': operation, 'db.query.text': sql.slice(0, 2048) } },
    work,
  );
}
