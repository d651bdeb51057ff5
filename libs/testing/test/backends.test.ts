import { readFile } from 'node:fs/promises';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { PgliteDb, useEmptyClusterTemplate } from '@agenthub/runtime';
import { backends, skipUnlessRequired } from '@agenthub/testing';

/**
 * What the test backends do to keep the suite quick without changing what it proves.
 *
 * A new embedded database starts from a dump of an empty cluster instead of running initdb (seconds
 * of CPU). Jest's global setup dumps one (dumpEmptyCluster) for the whole run and every test file
 * starts its embedded databases from it.
 */
describe('the empty PGlite cluster template', () => {
  it('is dumped by the global setup, and a new embedded database starts from it, from the first one on', async () => {
    const path = process.env.AGENTHUB_TEST_PGLITE_TEMPLATE;
    expect(path).toMatch(/agenthub-test-pglite-.+\.tar$/);
    // A marker added to the template shows that the new cluster was loaded from it, not made by initdb.
    const source = await PGlite.create({ loadDataDir: new Blob([await readFile(path!)]) });
    await source.exec('CREATE TABLE public.from_template (n int); INSERT INTO public.from_template VALUES (7)');
    const marked = await source.dumpDataDir('none');
    await source.close();

    useEmptyClusterTemplate(marked);
    const db = await PgliteDb.open({ schema: 'templated' });
    try {
      expect((await db.query('SELECT n FROM public.from_template')).rows).toEqual([{ n: 7 }]);
      await db.exec('CREATE TABLE items (id text PRIMARY KEY)');
      expect((await db.query("INSERT INTO items VALUES ('a')")).rowCount).toBe(1);
    } finally {
      await db.close();
    }
  });
});

const real = backends().find((backend) => backend.name === 'postgres+redis');
const skip = real ? undefined : skipUnlessRequired('real PostgreSQL and Redis are not reachable');

(skip ? describe.skip : describe)('a database of the real backend', () => {
  it('does not wait for the WAL flush on commit (synchronous_commit off), as nothing outlives the run', async () => {
    const provisioned = await real!.provision();
    const client = new pg.Client({ connectionString: provisioned.databaseUrl });
    await client.connect();
    try {
      expect((await client.query('SHOW synchronous_commit')).rows).toEqual([{ synchronous_commit: 'off' }]);
    } finally {
      await client.end();
      await provisioned.dispose();
    }
  });
});
