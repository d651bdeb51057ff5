import { Writable } from 'node:stream';
import { createLogger, type Logger } from '@agenthub/runtime';
import type { KeyWrapper, WrappedKey } from '../src/index.js';

/**
 * Everything sensitive a secrets test file handles, and every log line (debug level and up) the
 * services under test write. Each file ends with `checkLogsForLeaks()`, so the whole suite runs
 * with debug logging captured and proves that no value and no key of the key hierarchy appears.
 */
export const sensitive = {
  values: new Set<string>(),
  keys: new Set<string>(),
};

const lines: string[] = [];
// Every stack of the test file logs here at debug level (echoed to stdout when AGENTHUB_TEST_LOG
// is set, for debugging), so the leak check sees everything the services said.
const logger = createLogger({
  level: 'debug',
  destination: new Writable({
    write(chunk, _encoding, done) {
      lines.push(String(chunk));
      if (process.env.AGENTHUB_TEST_LOG) process.stdout.write(chunk);
      done();
    },
  }),
});

/** The logger services under test get. */
export function suiteLogger(): Logger {
  return logger;
}

export function capturedOutput(): string {
  return lines.join('');
}

/**
 * Registers, after the file's suites, a test that the captured debug output holds no value
 * (raw, JSON-escaped, base64 or hex) and no key-encryption or data key in any encoding.
 * `expected` are phrases the output must hold, proving the paths that log were taken.
 */
export function checkLogsForLeaks(expected: string[] = []): void {
  describe('the captured debug log', () => {
    test('holds no secret value and no key material', () => {
      const output = capturedOutput();
      expect(lines.length).toBeGreaterThan(0);
      expect(sensitive.values.size).toBeGreaterThan(0);
      expect(sensitive.keys.size).toBeGreaterThan(0);
      for (const phrase of expected) expect(output).toContain(phrase);
      const leaks: string[] = [];
      for (const value of sensitive.values) {
        const forms = [value, JSON.stringify(value).slice(1, -1), Buffer.from(value).toString('base64'), Buffer.from(value).toString('hex')];
        if (forms.some((form) => output.includes(form))) leaks.push(`value ${value.slice(0, 12)}…`);
      }
      for (const key of sensitive.keys) if (output.includes(key)) leaks.push(`key material ${key.slice(0, 6)}…`);
      expect(leaks).toEqual([]);
    });
  });
}

let counter = 0;
/** A distinctive value, remembered so the leak check can look for it. */
export function secretValue(label = 'v'): string {
  const value = `sv-${label}-${++counter}-${Math.random().toString(36).slice(2, 12)}`;
  sensitive.values.add(value);
  return value;
}

/** Remembers key material in every encoding a log line might show it in. */
export function rememberKey(key: Buffer): void {
  sensitive.keys.add(key.toString('base64'));
  sensitive.keys.add(key.toString('base64url'));
  sensitive.keys.add(key.toString('hex'));
}

/** A KeyWrapper that remembers every data key it wraps or unwraps, for the leak check. */
export function recording(inner: KeyWrapper): KeyWrapper {
  return {
    get currentVersion() {
      return inner.currentVersion;
    },
    async wrap(dataKey: Buffer, workspaceId: string) {
      rememberKey(Buffer.from(dataKey));
      return inner.wrap(dataKey, workspaceId);
    },
    async unwrap(key: WrappedKey, workspaceId: string) {
      const dataKey = await inner.unwrap(key, workspaceId);
      rememberKey(Buffer.from(dataKey));
      return dataKey;
    },
  };
}
