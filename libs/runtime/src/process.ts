import { ConfigError, loadConfig, type HubConfig } from './config.js';
import { createLogger, type Logger } from './logger.js';

/** Stops what a process started, in reverse order of starting. */
export type Stop = () => Promise<void>;

/**
 * Runs one process entry (`name` labels its log lines; `all` leaves that to each service): parses configuration (a bad variable exits with status 2 and a
 * message naming it), starts, and on SIGTERM/SIGINT stops gracefully before exiting.
 */
export async function runProcess(name: string, start: (config: HubConfig, log: Logger) => Promise<Stop>): Promise<void> {
  let config: HubConfig;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const log = createLogger({ level: config.LOG_LEVEL, service: name === 'all' ? undefined : name });
  warnUnsupportedNode(log);
  let stop: Stop;
  try {
    stop = await start(config, log);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(2);
    }
    log.fatal({ err }, 'failed to start');
    process.exitCode = 1;
    // Give pino a moment to flush before the process ends.
    setTimeout(() => process.exit(1), 100).unref();
    return;
  }
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'stopping');
    stop().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, 'unclean stop');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
}

/** The Node.js major version AgentHub is built and tested on (`.nvmrc`, `engines`, the image). */
export const SUPPORTED_NODE_MAJOR = 24;

/** Older runtimes still start (npm only warns about `engines`), but nobody tests them. */
function warnUnsupportedNode(log: Logger): void {
  const major = Number(process.versions.node.split('.')[0]);
  if (major < SUPPORTED_NODE_MAJOR) {
    log.warn({ node: process.version }, `Node ${process.version} is not supported; run AgentHub on Node ${SUPPORTED_NODE_MAJOR} LTS (nvm use reads .nvmrc)`);
  }
}
