import { pino, type Logger, type DestinationStream } from 'pino';
import { prettyDestination, type LogFormat } from './log-format.js';

export type { Logger };

/**
 * Paths pino blanks out wherever they appear in a log object. Callers should not log these at
 * all; this is the net under that rule, so a careless `log.debug({ req })` still leaks nothing.
 */
export const REDACTED_PATHS = [
  'authorization',
  '*.authorization',
  'headers.authorization',
  '*.headers.authorization',
  'req.headers.authorization',
  'api_key',
  '*.api_key',
  'apiKey',
  '*.apiKey',
  'push_secret',
  '*.push_secret',
  'pushSecret',
  '*.pushSecret',
  'token',
  '*.token',
  'adminToken',
  '*.adminToken',
  'secret',
  '*.secret',
  'value',
  '*.value',
  'password',
  '*.password',
  'params.value',
  '*.params.value',
];

/**
 * Fields database drivers attach to their errors that carry the statement or the values it was
 * run with (PGlite adds `query` and `params`; PostgreSQL's `detail` and `where` quote row
 * values): a failing insert would otherwise log the secret it was inserting.
 */
const STATEMENT_FIELDS = ['query', 'params', 'parameters', 'queryOptions', 'detail', 'where', 'internalQuery', 'hint'];

type SerializedError = Record<string, unknown> & { cause?: unknown; errors?: unknown };

/** pino's error serializer, minus the statement and its values, down the whole cause chain. */
export function serializeError(err: unknown): unknown {
  const serialized = pino.stdSerializers.err(err as Error) as unknown;
  return scrub(serialized, 0);
}

function scrub(value: unknown, depth: number): unknown {
  if (value === null || typeof value !== 'object' || depth > 8) return value;
  const out: SerializedError = { ...(value as SerializedError) };
  for (const field of STATEMENT_FIELDS) delete out[field];
  if (out.cause !== undefined) out.cause = scrub(out.cause, depth + 1);
  if (Array.isArray(out.errors)) out.errors = out.errors.map((inner) => scrub(inner, depth + 1));
  return out;
}

export interface LoggerOptions {
  level: string;
  service?: string;
  /** Where lines go; stdout by default. Tests pass a stream to capture output. */
  destination?: DestinationStream;
  /** JSON lines (the default) or one readable line per entry (LOG_FORMAT, see resolveLogFormat). */
  format?: LogFormat;
  /** ANSI colours in the pretty format. */
  colors?: boolean;
}

export function createLogger(options: LoggerOptions): Logger {
  return pino(
    {
      level: options.level,
      base: options.service ? { service: options.service } : {},
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      serializers: { err: serializeError },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    options.format === 'pretty'
      ? prettyDestination(options.destination ?? process.stdout, { colors: options.colors ?? false })
      : options.destination,
  );
}
