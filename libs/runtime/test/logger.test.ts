import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { createLogger, HubError, openDb } from '@agenthub/runtime';
import { backends } from '@agenthub/testing';

describe('createLogger', () => {
  it('redacts credentials and secret values wherever they are nested', () => {
    const lines: string[] = [];
    const destination = new Writable({ write(chunk, _enc, done) { lines.push(String(chunk)); done(); } });
    const log = createLogger({ level: 'debug', destination });
    log.info({ req: { headers: { authorization: 'Bearer ahk_live_key' } } }, 'request');
    log.info({ api_key: 'ahk_plain', params: { value: 's3cr3t-value' } }, 'call');
    log.debug({ agent: { token: 'aht_operator', secret: 'whsec_x', password: 'pw' } }, 'nested');
    const output = lines.join('');
    for (const leaked of ['ahk_live_key', 'ahk_plain', 's3cr3t-value', 'aht_operator', 'whsec_x', '"pw"']) {
      expect(output).not.toContain(leaked);
    }
    expect(output).toContain('[redacted]');
    expect(lines).toHaveLength(3);
  });
});

/**
 * Issue 12 item 8: a failing statement was logged with its parameters (a webhook insert logged
 * its `whsec_` secret). A real failing statement on each backend, logged the way the gRPC server
 * logs an internal failure, must leave the values out and keep what locates the fault.
 */
describe.each(backends().map((b) => [b.name, b] as const))('logged database errors (%s)', (_name, backend) => {
  it('keep the SQLSTATE but drop the statement and its values', async () => {
    const provisioned = await backend.provision();
    const db = await openDb({ url: provisioned.databaseUrl, schema: 'logged_errors' });
    const lines: string[] = [];
    const log = createLogger({ level: 'debug', destination: new Writable({ write(chunk, _enc, done) { lines.push(String(chunk)); done(); } }) });
    const secret = `whsec_${randomBytes(12).toString('hex')}`;
    try {
      await db.exec('CREATE TABLE hooks (id text PRIMARY KEY, secret text UNIQUE)');
      await db.query('INSERT INTO hooks (id, secret) VALUES ($1, $2)', ['h1', secret]);
      const failure = await db.query('INSERT INTO hooks (id, secret) VALUES ($1, $2)', ['h2', secret]).then(() => undefined, (err: unknown) => err);
      expect(failure).toBeDefined();
      log.error({ err: failure }, 'statement failed');
      log.error({ err: HubError.from(failure) }, 'rpc failed');
      log.error({ err: new Error('wrapped', { cause: failure }) }, 'wrapped');
    } finally {
      await db.close();
      await provisioned.dispose();
    }
    const output = lines.join('');
    expect(lines).toHaveLength(3);
    expect(output).toContain('23505');
    expect(output).not.toContain(secret);
    expect(output).not.toContain('INSERT INTO');
  });
});
