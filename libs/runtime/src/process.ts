import { ConfigError, loadConfig, type HubConfig } from './config.js';
import { limitHeapGrowth } from './heap.js';
import { ListenError } from './listen.js';
import { resolveLogFormat } from './log-format.js';
import { createLogger, type Logger } from './logger.js';
import { startTracing } from './tracing.js';

/** Stops what a process started, in reverse order of starting. */
export type Stop = () => Promise<void>;

/** Exit statuses of `agenthub serve`, as the README documents them. */
export const EXIT = {
  /** Stopped by SIGTERM/SIGINT after a clean shutdown. */
  OK: 0,
  /** Failed to start (a dependency unreachable, a bug), or the shutdown was not clean. */
  FAILED: 1,
  /** A configuration variable is invalid; the message names it. */
  CONFIG: 2,
  /** A port is taken or an address cannot be bound; the message names the variable. */
  LISTEN: 3,
} as const;

/** System error codes of a dependency the operator pointed at and that did not answer. */
const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ECONNRESET', 'EACCES', 'EROFS', 'ENOSPC']);

/**
 * Runs one process entry (`name` labels its log lines; `all` leaves that to each service): parses
 * configuration, starts, and on SIGTERM/SIGINT stops gracefully before exiting. Operator mistakes
 * (a bad variable, a taken port, a database that does not answer) end with a plain message on
 * stderr and the status of EXIT, never a stack trace.
 */
export async function runProcess(name: string, start: (config: HubConfig, log: Logger, fail: (err: Error) => void) => Promise<Stop>): Promise<void> {
  limitHeapGrowth();
  let config: HubConfig;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(EXIT.CONFIG);
    }
    throw err;
  }
  const log = processLogger(config, name === 'all' ? undefined : name);
  warnUnsupportedNode(log);
  const stopTracing = await startTracing(config, { serviceName: name === 'all' ? 'agenthub' : `agenthub-${name}` });
  // Listening from the start: a SIGTERM that arrives while migrations run (a rollout, a scale
  // down) stops the process once it started instead of killing it midway. A second signal, while
  // starting or stopping, exits at once.
  let stop: Stop | undefined;
  let signalled: string | undefined;
  let stopping = false;
  // A part of the running process failed for good (the gateway process of `serve all`): stop the
  // rest and exit FAILED, so the supervisor restarts the whole.
  let failed = false;
  const shutdown = () => {
    if (stopping || !stop || !signalled) return;
    stopping = true;
    log.info({ signal: signalled }, 'stopping');
    const began = performance.now();
    stop().then(
      () => {
        log.info({ ms: Math.round(performance.now() - began) }, 'stopped');
        // The last spans are flushed before exit (a failing collector does not hold the exit up).
        return stopTracing().finally(() => process.exit(failed ? EXIT.FAILED : EXIT.OK));
      },
      (err: unknown) => {
        log.error({ err }, 'unclean stop');
        process.exit(EXIT.FAILED);
      },
    );
  };
  const onSignal = (signal: string) => {
    if (signalled) process.exit(EXIT.FAILED);
    signalled = signal;
    shutdown();
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
  const fail = (err: Error) => {
    log.error({ err }, 'stopping: a part of the process failed');
    failed = true;
    signalled ??= 'failure';
    shutdown();
  };
  try {
    stop = await start(config, log, fail);
  } catch (err) {
    const status = err instanceof ConfigError ? EXIT.CONFIG : err instanceof ListenError ? EXIT.LISTEN : EXIT.FAILED;
    const code = (err as NodeJS.ErrnoException | undefined)?.code;
    if (status !== EXIT.FAILED || (code && UNREACHABLE.has(code))) {
      process.stderr.write(`agenthub: ${status === EXIT.FAILED ? 'cannot start: ' : ''}${(err as Error).message}\n`);
    } else {
      log.fatal({ err }, 'failed to start');
    }
    process.exitCode = status;
    // Give pino a moment to flush before the process ends.
    setTimeout(() => process.exit(status), 100).unref();
    return;
  }
  shutdown();
}

/** The logger of one process (`service` labels its lines) as LOG_LEVEL, LOG_FORMAT and NO_COLOR set it. */
export function processLogger(config: HubConfig, service: string | undefined): Logger {
  const format = resolveLogFormat(config.LOG_FORMAT, process.stdout);
  return createLogger({
    level: config.LOG_LEVEL,
    service,
    format,
    colors: format === 'pretty' && process.stdout.isTTY === true && !config.NO_COLOR,
  });
}

/** The Node.js major version AgentHub is built and tested on (`.nvmrc`, `engines`, the image). */
export const SUPPORTED_NODE_MAJOR = 24;

/**
 * The warning a process logs at start on a Node.js older than the supported one (`version` as in
 * process.versions.node), or undefined. Older runtimes still start (npm only warns about
 * `engines`), but nobody tests them.
 */
export function unsupportedNodeWarning(version: string): string | undefined {
  const major = Number(version.split('.')[0]);
  if (major >= SUPPORTED_NODE_MAJOR) return undefined;
  return `Node v${version} is not supported; run AgentHub on Node ${SUPPORTED_NODE_MAJOR} LTS (nvm use reads .nvmrc)`;
}

function warnUnsupportedNode(log: Logger): void {
  const warning = unsupportedNodeWarning(process.versions.node);
  if (warning) log.warn({ node: process.version }, warning);
}
