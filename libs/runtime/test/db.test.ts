import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { EmbeddedCluster, isUniqueViolation, migrate, openDb, type Db } from '@agenthub/runtime';
import { backends, testLogger, type ProvisionedBackend } from '@agenthub/testing';

async function eventually(check: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`Timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

async function migrationsDir(files: Record<string, string>): Promise<{ url: URL; dispose: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'agenthub-migrations-'));
  for (const [name, sql] of Object.entries(files)) await writeFile(join(dir, name), sql);
  return { url: pathToFileURL(`${dir}/`), dispose: () => rm(dir, { recursive: true, force: true }) };
}

describe.each(backends().map((b) => [b.name, b] as const))('Db adapter (%s)', (_name, backend) => {
  let provisioned: ProvisionedBackend;
  let db: Db;
  const log = testLogger();

  beforeAll(async () => {
    provisioned = await backend.provision();
    db = await openDb({ url: provisioned.databaseUrl, schema: 'dbtest' });
    await db.exec('CREATE SCHEMA IF NOT EXISTS dbtest; CREATE TABLE dbtest.items (id text PRIMARY KEY, at bigint NOT NULL)');
  });
  afterAll(async () => {
    await db?.close();
    await provisioned?.dispose();
  });

  it('returns bigint columns as numbers and counts affected rows', async () => {
    const at = 1_795_644_421_228;
    const insert = await db.query('INSERT INTO items (id, at) VALUES ($1, $2)', ['a', at]);
    expect(insert.rowCount).toBe(1);
    const { rows } = await db.query<{ id: string; at: number }>('SELECT id, at FROM items WHERE id = $1', ['a']);
    expect(rows).toEqual([{ id: 'a', at }]);
  });

  it('counts the rows a SELECT returns, as PostgreSQL does', async () => {
    await db.query('INSERT INTO items (id, at) VALUES ($1, 1), ($2, 2)', ['count-1', 'count-2']);
    expect((await db.query("SELECT id FROM items WHERE id LIKE 'count-%'")).rowCount).toBe(2);
    expect((await db.query("SELECT id FROM items WHERE id = 'nobody'")).rowCount).toBe(0);
    expect((await db.query("UPDATE items SET at = 3 WHERE id LIKE 'count-%' RETURNING id")).rowCount).toBe(2);
  });

  it('commits a transaction that resolves and rolls back one that throws', async () => {
    await db.transaction(async (tx) => {
      await tx.query('INSERT INTO items (id, at) VALUES ($1, 1)', ['kept']);
    });
    await expect(db.transaction(async (tx) => {
      await tx.query('INSERT INTO items (id, at) VALUES ($1, 1)', ['dropped']);
      throw new Error('changed my mind');
    })).rejects.toThrow('changed my mind');
    const { rows } = await db.query<{ id: string }>("SELECT id FROM items WHERE id IN ('kept', 'dropped')");
    expect(rows.map((r) => r.id)).toEqual(['kept']);
  });

  it('notifies every listener once the transaction commits, in order, none for a rollback and none after unlistening', async () => {
    const heard: string[] = [];
    const left: string[] = [];
    const until = (payload: string) => eventually(() => heard.includes(payload), `${payload} was heard`);
    const unlisten = await db.listen('dbtest_channel', (payload) => heard.push(payload));
    const unlistenLeft = await db.listen('dbtest_channel', (payload) => left.push(payload));
    try {
      await db.transaction(async (tx) => {
        tx.notify('dbtest_channel', 'committed');
        await tx.query('SELECT 1');
        // Sent at commit, not before.
        expect(heard).toEqual([]);
      });
      await until('committed');
      await unlistenLeft();
      await db.transaction(async (tx) => {
        tx.notify('dbtest_channel', 'rolled back');
        throw new Error('changed my mind');
      }).catch(() => undefined);
      db.notify('dbtest_channel', 'after');
      // Notifications arrive in order: hearing 'after' means nothing else is on its way.
      await until('after');
      expect(heard).toEqual(['committed', 'after']);
      expect(left).toEqual(['committed']);
    } finally {
      await unlisten();
    }
  });

  const twoProcesses = backend.name === 'embedded' ? it.skip : it;
  const oneProcess = backend.name === 'embedded' ? ' (skipped: a PGlite database has one process, so no other to tell)' : '';
  twoProcesses(`tells other processes of a notify only while no listener of this handle stands in for them${oneProcess}`, async () => {
    const other = await openDb({ url: provisioned.databaseUrl, schema: 'dbtest' });
    const elsewhere: string[] = [];
    const here: string[] = [];
    const unlistenElsewhere = await other.listen('dbtest_standin', (payload) => elsewhere.push(payload));
    try {
      db.notify('dbtest_standin', 'before');
      await eventually(() => elsewhere.includes('before'), 'the other process heard the first notify');
      const unlisten = await db.listen('dbtest_standin', (payload) => here.push(payload), { standsInForOthers: true });
      db.notify('dbtest_standin', 'covered');
      await unlisten();
      db.notify('dbtest_standin', 'after');
      // Notifications arrive in order: hearing 'after' means 'covered' was never sent.
      await eventually(() => elsewhere.includes('after'), 'the other process heard the last notify');
      expect([here, elsewhere]).toEqual([['covered'], ['before', 'after']]);
    } finally {
      await unlistenElsewhere();
      await other.close();
    }
  });

  it('recognises unique violations', async () => {
    const err = await db.query('INSERT INTO items (id, at) VALUES ($1, 1)', ['a']).catch((e: unknown) => e);
    expect(isUniqueViolation(err)).toBe(true);
    expect(isUniqueViolation(new Error('other'))).toBe(false);
  });

  it('applies migrations once, in order, and reports a failing one by name without applying it', async () => {
    const dir = await migrationsDir({
      '001_first.sql': 'CREATE TABLE things (id int PRIMARY KEY);',
      '002_second.sql': 'ALTER TABLE things ADD COLUMN name text; INSERT INTO things VALUES (1, $$one$$);',
    });
    try {
      expect(await migrate(db, { schema: 'migtest', dir: dir.url, log })).toBe(2);
      expect(await migrate(db, { schema: 'migtest', dir: dir.url, log })).toBe(0);
      const { rows } = await db.query<{ name: string }>('SELECT name FROM migtest.things');
      expect(rows).toEqual([{ name: 'one' }]);

      await writeFile(new URL('003_broken.sql', dir.url), 'INSERT INTO things VALUES (2, $$two$$); SELECT * FROM nowhere;');
      await expect(migrate(db, { schema: 'migtest', dir: dir.url, log })).rejects.toThrow(/migtest\/003_broken\.sql/);
      const after = await db.query('SELECT 1 FROM migtest.things WHERE id = 2');
      expect(after.rowCount).toBe(0);
      const versions = await db.query<{ version: number }>('SELECT version FROM migtest.schema_migrations ORDER BY version');
      expect(versions.rows.map((r) => r.version)).toEqual([1, 2]);
    } finally {
      await dir.dispose();
    }
  });

  const concurrent = backend.name === 'embedded' ? it.skip : it;
  const reason = backend.name === 'embedded' ? ' (skipped: a PGlite data directory has exactly one process)' : '';
  concurrent(`lets replicas starting together apply each migration exactly once${reason}`, async () => {
    const dir = await migrationsDir({ '001_once.sql': 'CREATE TABLE once (id int); INSERT INTO once VALUES (1);' });
    const replicas = await Promise.all([1, 2, 3].map(() => openDb({ url: provisioned.databaseUrl, schema: 'racetest' })));
    try {
      const applied = await Promise.all(replicas.map((r) => migrate(r, { schema: 'racetest', dir: dir.url, log })));
      expect(applied.reduce((a, b) => a + b, 0)).toBe(1);
      expect((await db.query('SELECT * FROM racetest.once')).rowCount).toBe(1);
    } finally {
      await Promise.all(replicas.map((r) => r.close()));
      await dir.dispose();
    }
  });
});

describe('EmbeddedCluster (the services of an in-memory hub, a schema each on one PGlite)', () => {
  const log = testLogger();

  it('keeps each schema to itself while their statements, transactions and a migration interleave', async () => {
    const cluster = await EmbeddedCluster.create();
    const dir = await migrationsDir({
      ...Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`00${i + 1}_notes.sql`, `${i === 0 ? 'CREATE TABLE notes (v text); ' : ''}INSERT INTO notes VALUES ('beta ${i + 1}');`])),
      // Rolled back: what the other schema wrote meanwhile must not go with it.
      '006_broken.sql': "INSERT INTO notes VALUES ('never'); SELECT * FROM nowhere;",
    });
    try {
      const alpha = await openDb({ schema: 'alpha', cluster });
      const beta = await openDb({ schema: 'beta', cluster });
      await alpha.exec('CREATE TABLE items (v text)');
      await beta.exec('CREATE TABLE items (v text)');
      let migrating = true;
      const migration = migrate(beta, { schema: 'beta', dir: dir.url, log }).finally(() => (migrating = false));
      migration.catch(() => undefined);
      // Alpha's statements keep coming for as long as beta's migration runs, so they would land
      // between its BEGIN and COMMIT if it did not have the connection to itself.
      let written = 0;
      const writes = (async () => {
        while (migrating) {
          await alpha.query('INSERT INTO items VALUES ($1)', [`alpha ${written}`]);
          await alpha.transaction(async (tx) => {
            await tx.query('INSERT INTO items VALUES ($1)', [`alpha tx ${written}`]);
            await tx.query('INSERT INTO items VALUES ($1)', [`alpha tx ${written} again`]);
          });
          await beta.query('INSERT INTO items VALUES ($1)', [`beta ${written}`]);
          written += 1;
          // PGlite answers within microtasks: without a turn of the event loop, the migration's
          // file reads would never complete.
          await new Promise((resolve) => setImmediate(resolve));
        }
      })();
      await expect(migration).rejects.toThrow(/beta\/006_broken\.sql/);
      await writes;
      expect(written).toBeGreaterThan(0);
      expect((await alpha.query('SELECT v FROM items')).rows).toHaveLength(3 * written);
      expect((await beta.query<{ v: string }>('SELECT v FROM notes ORDER BY v')).rows.map((r) => r.v)).toEqual(['beta 1', 'beta 2', 'beta 3', 'beta 4', 'beta 5']);
      const stray = await alpha.query<{ found: string | null }>("SELECT to_regclass('alpha.notes')::text AS found");
      expect(stray.rows).toEqual([{ found: null }]);
      expect((await beta.query<{ v: string }>('SELECT v FROM items')).rows.every((r) => r.v.startsWith('beta'))).toBe(true);

      // One service's handle closing leaves the others' (and the cluster) open.
      await alpha.close();
      expect((await beta.query('SELECT v FROM items')).rows).toHaveLength(written);
    } finally {
      await cluster.close();
      await dir.dispose();
    }
  });
});
