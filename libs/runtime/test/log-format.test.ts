import { createLogger, resolveLogFormat } from '@agenthub/runtime';

/** The pretty format as a person reads it; the child-process tests in services/hub cover LOG_FORMAT end to end. */
function capture(colors: boolean) {
  let text = '';
  const log = createLogger({ level: 'debug', service: 'gateway', format: 'pretty', colors, destination: { write: (chunk: string) => (text += chunk) } });
  return { log, text: () => text };
}

describe('resolveLogFormat', () => {
  it('is pretty on a terminal and JSON anywhere else, unless LOG_FORMAT says', () => {
    expect(resolveLogFormat('auto', { isTTY: true })).toBe('pretty');
    expect(resolveLogFormat('auto', {})).toBe('json');
    expect(resolveLogFormat('json', { isTTY: true })).toBe('json');
    expect(resolveLogFormat('pretty', {})).toBe('pretty');
  });
});

describe('pretty log lines', () => {
  it('put time, level, service and message first, then the fields', () => {
    const { log, text } = capture(false);
    log.info({ address: '127.0.0.1:5000', note: 'two words' }, 'gRPC service listening');
    expect(text()).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO {2}gateway gRPC service listening address=127\.0\.0\.1:5000 note="two words"\n$/);
  });

  it('show an error by its message, its stack on indented lines', () => {
    const { log, text } = capture(false);
    log.error({ err: Object.assign(new Error('connect refused'), { code: 'ECONNREFUSED' }) }, 'call failed');
    const [line, ...stack] = text().trimEnd().split('\n');
    expect(line).toMatch(/ ERROR gateway call failed err="connect refused" code=ECONNREFUSED$/);
    expect(stack.length).toBeGreaterThan(0);
    for (const frame of stack) expect(frame).toMatch(/^ {4}at /);
  });

  it('colour the level when asked', () => {
    const { log, text } = capture(true);
    log.warn('careful');
    expect(text()).toContain('\u001b[33mWARN \u001b[0m');
  });

  it('show what pino redacted as redacted', () => {
    const { log, text } = capture(false);
    log.info({ headers: { authorization: 'Bearer ahk_secret_key' } }, 'request');
    expect(text()).not.toContain('ahk_secret_key');
    expect(text()).toContain('[redacted]');
  });
});
