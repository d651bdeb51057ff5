import { Writable } from 'node:stream';
import { createLogger } from '@agenthub/runtime';

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
