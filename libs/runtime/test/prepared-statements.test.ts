import { loadConfig, openBackends, PostgresDb, type Db } from '@agenthub/runtime';
import { backends, type ProvisionedBackend } from '@agenthub/testing';

/**
 * On PostgreSQL a statement with parameters is parsed and planned once per connection, not on
 * every call; what it returns is the same, also when a newer replica's migration changes a table
 * under it. One connection per pool here, so "this connection" is the pool's.
 */
const real = backends().find((b) => b.name === 'postgres+redis');

(real ? describe : describe.skip)(`prepared statements${real ? '' : ' (skipped: no PostgreSQL reachable)'}`, () => {
  let provisioned: ProvisionedBackend;
  let db: Db;

  const preparedOn = async (on: Db) =>
    (await on.query<{ statement: string }>("SELECT statement FROM pg_prepared_statements WHERE name LIKE 'agenthub_%' ORDER BY prepare_time")).rows.map((row) => row.statement);

  beforeAll(async () => {
    provisioned = await real!.provision();
    db = new PostgresDb({ url: provisioned.databaseUrl!, schema: 'prepared', maxConnections: 1 });
    await db.exec('CREATE SCHEMA prepared; CREATE TABLE prepared.items (id text PRIMARY KEY, size int NOT NULL)');
    await db.query("INSERT INTO items VALUES ('a', 1), ('b', 2)");
  });
  afterAll(async () => {
    await db?.close();
    await provisioned?.dispose();
  });

  it('prepares a statement with parameters once on the connection and answers the same from it', async () => {
    const byId = 'SELECT id, size FROM items WHERE id = $1';
    expect((await db.query(byId, ['a'])).rows).toEqual([{ id: 'a', size: 1 }]);
    expect((await db.query(byId, ['b'])).rows).toEqual([{ id: 'b', size: 2 }]);
    await db.transaction(async (tx) => expect((await tx.query(byId, ['a'])).rows).toEqual([{ id: 'a', size: 1 }]));
    expect((await preparedOn(db)).filter((statement) => statement === byId)).toHaveLength(1);
  });

  it('leaves unnamed a statement without parameters, and one that selects or returns *', async () => {
    await db.query('SELECT count(*)::int AS n FROM items');
    await db.query('SELECT * FROM items WHERE id = $1', ['a']);
    await db.query('UPDATE items SET size = size WHERE id = $1 RETURNING *', ['a']);
    const prepared = await preparedOn(db);
    expect(prepared).not.toContain('SELECT count(*)::int AS n FROM items');
    expect(prepared.some((statement) => statement.includes('*'))).toBe(false);
  });

  it('follows a column added under it, and after a changed column type fails once, then plans afresh', async () => {
    const sizes = 'SELECT id, size FROM items WHERE size >= $1 ORDER BY id';
    const whole = 'SELECT * FROM items WHERE id = $1';
    expect((await db.query(sizes, [0])).rows).toEqual([{ id: 'a', size: 1 }, { id: 'b', size: 2 }]);
    await db.query(whole, ['a']);

    await db.exec("ALTER TABLE items ADD COLUMN colour text NOT NULL DEFAULT 'red'");
    expect((await db.query(sizes, [2])).rows).toEqual([{ id: 'b', size: 2 }]);
    expect((await db.query(whole, ['a'])).rows).toEqual([{ id: 'a', size: 1, colour: 'red' }]);

    await db.exec('ALTER TABLE items ALTER COLUMN size TYPE bigint');
    await expect(db.query(sizes, [0])).rejects.toMatchObject({ code: '0A000' });
    expect((await db.query(sizes, [0])).rows).toEqual([{ id: 'a', size: 1 }, { id: 'b', size: 2 }]);
  });

  it('prepares nothing with DATABASE_PREPARED_STATEMENTS=false', async () => {
    const config = loadConfig({ DATABASE_URL: provisioned.databaseUrl, DATABASE_PREPARED_STATEMENTS: 'false' });
    expect(config.DATABASE_PREPARED_STATEMENTS).toBe(false);
    // As every service opens its database: the schema is the service's name.
    const { db: unprepared, kv } = await openBackends({ ...config, DATABASE_POOL_SIZE: 1 }, 'prepared');
    try {
      expect((await unprepared.query('SELECT id FROM items WHERE id = $1', ['a'])).rows).toEqual([{ id: 'a' }]);
      expect(await preparedOn(unprepared)).toEqual([]);
    } finally {
      await unprepared.close();
      await kv.close();
    }
  });
});
