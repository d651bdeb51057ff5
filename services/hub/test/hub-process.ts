import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { START_TIMEOUT_MS } from './bin.js';

/**
 * A real `agenthub serve all` child process (the built hub: `npm run build` first), for tests that
 * must kill the process itself (SIGKILL: no shutdown hook runs) and start it again on the same data.
 */

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const BIN = join('services', 'hub', 'bin', 'agenthub.js');

export interface HubProcess {
  readonly url: string;
  readonly child: ChildProcess;
  /** Sends `signal` and resolves once the process is gone. */
  kill(signal: NodeJS.Signals): Promise<void>;
  output(): string;
}

/** The environment of this test, minus anything that would point the hub at other backends. */
export function hubEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (/^(HUB_|DATABASE_|REDIS_|GRPC_|IDENTITY_|WORKSPACE_|MESSAGING_|EVENTS_|WEBHOOK_|LOG_LEVEL$|NODE_OPTIONS$)/.test(key)) continue;
    env[key] = value;
  }
  return { ...env, LOG_LEVEL: 'warn', ...extra };
}

export { freePort } from '@agenthub/testing';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Starts `agenthub serve all` with `env` (which names HUB_PORT) and waits until /readyz answers 200. */
export async function startHubProcess(env: Record<string, string>): Promise<HubProcess> {
  const url = `http://127.0.0.1:${env.HUB_PORT}`;
  const child = spawn(process.execPath, [BIN, 'serve', 'all'], { cwd: ROOT, env: hubEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const hub: HubProcess = {
    url,
    child,
    async kill(signal) {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
    output: () => output,
  };
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`agenthub serve exited early:\n${output}`);
    try {
      const response = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(2_000) });
      if (response.status === 200) return hub;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await hub.kill('SIGKILL');
      throw new Error(`agenthub serve was not ready within ${START_TIMEOUT_MS} ms:\n${output}`);
    }
    await sleep(200);
  }
}
