import type { DestinationStream } from 'pino';

/** `json`: one JSON object per line, for collectors. `pretty`: one readable line, for a person. */
export type LogFormat = 'json' | 'pretty';

/** LOG_FORMAT as configured; `auto` is pretty on a terminal and JSON anywhere else. */
export type LogFormatSetting = LogFormat | 'auto';

export function resolveLogFormat(setting: LogFormatSetting, stdout: { isTTY?: boolean }): LogFormat {
  if (setting !== 'auto') return setting;
  return stdout.isTTY ? 'pretty' : 'json';
}

const LEVELS: Record<number, { name: string; color: string }> = {
  10: { name: 'TRACE', color: '90' },
  20: { name: 'DEBUG', color: '34' },
  30: { name: 'INFO ', color: '32' },
  40: { name: 'WARN ', color: '33' },
  50: { name: 'ERROR', color: '31' },
  60: { name: 'FATAL', color: '41;97' },
};

/** Fields every line has, shown in the line's head rather than as `key=value`. */
const HEAD = new Set(['level', 'time', 'msg', 'service', 'pid', 'hostname']);

interface SerializedError {
  type?: string;
  message?: string;
  stack?: string;
  code?: string;
}

/**
 * A pino destination that turns each JSON line into `12:04:05.120 INFO  gateway  message key=value`,
 * coloured when `colors`. It reads what pino already redacted, so it shows nothing JSON would not.
 * An error's stack follows on indented lines: a person reading a terminal is debugging.
 */
export function prettyDestination(out: { write(text: string): unknown }, options: { colors: boolean }): DestinationStream {
  const paint = (code: string, text: string) => (options.colors ? `\u001b[${code}m${text}\u001b[0m` : text);
  return {
    write(line: string) {
      let entry: Record<string, unknown>;
      try {
        entry = JSON.parse(line) as Record<string, unknown>;
      } catch {
        out.write(line);
        return;
      }
      const level = LEVELS[entry.level as number] ?? { name: String(entry.level), color: '0' };
      const time = typeof entry.time === 'string' ? entry.time.slice(11, 23) : new Date().toISOString().slice(11, 23);
      const parts = [paint('90', time), paint(level.color, level.name)];
      if (typeof entry.service === 'string') parts.push(paint('36', entry.service));
      parts.push(String(entry.msg ?? ''));
      let stack = '';
      for (const [key, value] of Object.entries(entry)) {
        if (HEAD.has(key) || value === undefined) continue;
        if (key === 'err' && value && typeof value === 'object') {
          const err = value as SerializedError;
          parts.push(`${paint('90', 'err=')}${paint('31', quote(err.message ?? err.type ?? 'error'))}`);
          if (err.code) parts.push(`${paint('90', 'code=')}${err.code}`);
          if (err.stack) stack = `\n${err.stack.split('\n').slice(1).map((s) => `    ${s.trim()}`).join('\n')}`;
          continue;
        }
        parts.push(`${paint('90', `${key}=`)}${typeof value === 'string' ? quote(value) : JSON.stringify(value)}`);
      }
      out.write(`${parts.join(' ')}${stack ? paint('90', stack) : ''}\n`);
    },
  };
}

/** Bare when it reads unambiguously, JSON-quoted when it holds spaces, quotes or `=`. */
function quote(value: string): string {
  return /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value);
}
