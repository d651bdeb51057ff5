import type { Db, Queryable, QueryResult } from './db/index.js';
import type { Relay } from './relay.js';

// Anywhere in the statement: an event may be written in a CTE beside the rows it announces.
const OUTBOX_INSERT = /\binsert\s+into\s+(\w+\.)?outbox\b/i;

/**
 * A Db whose statements and transactions that wrote to the outbox return only once the relay has
 * put those rows on the bus (`Relay.flush`, bounded). A call that answers after its write thus
 * answers after its event is on the log, so an event another service writes after that answer
 * (for the same workspace) comes after it: the order a client that waits for answers caused holds
 * across services, which each publish their own outbox. Other statements pass straight through.
 */
export function publishBeforeReturning(db: Db, relay: Pick<Relay, 'flush'>): Db {
  return {
    engine: db.engine,
    async query<R>(sql: string, params?: readonly unknown[], signal?: AbortSignal): Promise<QueryResult<R>> {
      const result = await db.query<R>(sql, params, signal);
      if (OUTBOX_INSERT.test(sql)) await relay.flush();
      return result;
    },
    exec: (sql) => db.exec(sql),
    notify: (channel, payload) => db.notify(channel, payload),
    async transaction<T>(work: (tx: Queryable) => Promise<T>, signal?: AbortSignal): Promise<T> {
      let wrote = false;
      let seq: string | undefined;
      const result = await db.transaction(async (tx) => {
        const done = await work({
          query<R>(sql: string, params?: readonly unknown[], querySignal?: AbortSignal) {
            if (OUTBOX_INSERT.test(sql)) wrote = true;
            return tx.query<R>(sql, params, querySignal);
          },
          exec: (sql) => tx.exec(sql),
          notify: (channel, payload) => tx.notify(channel, payload),
        });
        // The last row this transaction wrote, so the relay pass already under way (woken by an
        // earlier commit, or by this one) can release the call instead of a pass after it.
        if (wrote) seq = (await tx.query<{ seq: string }>("SELECT currval(pg_get_serial_sequence('outbox', 'seq'))::text AS seq", [], signal)).rows[0]?.seq;
        return done;
      }, signal);
      if (wrote) await relay.flush(seq);
      return result;
    },
    withAdvisoryLock: (name, work) => db.withAdvisoryLock(name, work),
    listen: (channel, onNotify) => db.listen(channel, onNotify),
    close: () => db.close(),
  };
}
