import type { Db, Queryable, QueryResult } from './db/index.js';
import { OUTBOX_CHANNEL } from './outbox.js';
import type { Relay } from './relay.js';

/**
 * A Db whose transactions that appended events (`appendEvent`, which notifies OUTBOX_CHANNEL in
 * the transaction) return only once the relay has put those rows on the bus (`Relay.flush`,
 * bounded). A call that answers after its write thus answers after its event is on the log, so an
 * event another service writes after that answer (for the same workspace) comes after it: the
 * order a client that waits for answers caused holds across services, which each publish their
 * own outbox. Statements outside a transaction, and transactions that appended nothing, pass
 * straight through.
 */
export function publishBeforeReturning(db: Db, relay: Pick<Relay, 'flush'>): Db {
  return {
    engine: db.engine,
    query<R>(sql: string, params?: readonly unknown[], signal?: AbortSignal): Promise<QueryResult<R>> {
      return db.query<R>(sql, params, signal);
    },
    exec: (sql) => db.exec(sql),
    notify: (channel, payload) => db.notify(channel, payload),
    async transaction<T>(work: (tx: Queryable) => Promise<T>, signal?: AbortSignal): Promise<T> {
      let appended = false;
      let seq: string | undefined;
      const result = await db.transaction(async (tx) => {
        const done = await work({
          query: (sql, params, querySignal) => tx.query(sql, params, querySignal),
          exec: (sql) => tx.exec(sql),
          notify(channel, payload) {
            if (channel === OUTBOX_CHANNEL) appended = true;
            tx.notify(channel, payload);
          },
        });
        // The last row this transaction wrote, so the relay pass already under way (woken by an
        // earlier commit, or by this one) can release the call instead of a pass after it.
        if (appended) seq = (await tx.query<{ seq: string }>("SELECT currval(pg_get_serial_sequence('outbox', 'seq'))::text AS seq", [], signal)).rows[0]?.seq;
        return done;
      }, signal);
      if (appended) await relay.flush(seq);
      return result;
    },
    withAdvisoryLock: (name, work) => db.withAdvisoryLock(name, work),
    listen: (channel, onNotify, options) => db.listen(channel, onNotify, options),
    close: () => db.close(),
  };
}
