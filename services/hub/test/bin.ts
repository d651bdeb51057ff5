import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The built `agenthub` command as a child process (`npm run build` first), for the tests that use
 * it the way an operator does: its output, its exit status, its signals.
 */

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const BIN = join('services', 'hub', 'bin', 'agenthub.js');

// A first `serve all` on a fresh data directory (initdb, every service's migrations), at trace
// level, took over 60 s on a 2-core machine under a full test run's load.
export const START_TIMEOUT_MS = 120_000;
export const STOP_TIMEOUT_MS = 10_000;
export const COMMAND_TIMEOUT_MS = 30_000;
/** A test that runs several commands one after another (each a node process start, seconds under load). */
export const COMMANDS_TIMEOUT_MS = 4 * COMMAND_TIMEOUT_MS;
export const HOOK_TIMEOUT_MS = START_TIMEOUT_MS + STOP_TIMEOUT_MS + 10_000;

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface CommandResult extends Exit {
  stdout: string;
  stderr: string;
}

export interface Served {
  child: ChildProcess;
  exited: Promise<Exit>;
  output(): { stdout: string; stderr: string };
}

/** The environment of this test, minus anything that would point the hub at other backends. */
export function baseEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (/^(HUB_|DATABASE_|REDIS_|GRPC_|IDENTITY_|WORKSPACE_|LOG_LEVEL$|LOG_FORMAT$|NODE_OPTIONS$)/.test(key)) continue;
    env[key] = value;
  }
  return { ...env, LOG_LEVEL: 'warn', ...extra };
}

export function spawnBin(args: string[], env: Record<string, string>, stdin: 'ignore' | 'pipe' = 'ignore'): ChildProcess {
  return spawn(process.execPath, [BIN, ...args], { cwd: ROOT, env: baseEnv(env), stdio: [stdin, 'pipe', 'pipe'] });
}

export function exitOf(child: ChildProcess): Promise<Exit> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve({ code: child.exitCode, signal: child.signalCode });
    else child.once('exit', (code, signal) => resolve({ code, signal }));
  });
}

/** Runs one `agenthub` command to completion; `input`, when given, is its standard input. */
export async function agenthub(args: string[], env: Record<string, string>, input?: string): Promise<CommandResult> {
  const child = spawnBin(args, env, input === undefined ? 'ignore' : 'pipe');
  if (input !== undefined) child.stdin!.end(input);
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const timer = setTimeout(() => child.kill('SIGKILL'), COMMAND_TIMEOUT_MS);
  const exit = await exitOf(child);
  clearTimeout(timer);
  return { ...exit, stdout, stderr };
}

export { freePort } from '@agenthub/testing';

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Every `serve` still running. */
const running = new Set<ChildProcess>();

/** Starts `agenthub serve all` and waits until GET /readyz answers 200. */
export async function serve(env: Record<string, string>, url: string): Promise<Served> {
  const child = spawnBin(['serve', 'all'], env);
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const served: Served = { child, exited: exitOf(child), output: () => ({ stdout, stderr }) };
  running.add(child);
  void served.exited.then(() => running.delete(child));

  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`agenthub serve exited early (${child.exitCode ?? child.signalCode}):\n${stdout}\n${stderr}`);
    }
    try {
      const response = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(2_000) });
      if (response.status === 200) return served;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`agenthub serve was not ready within ${START_TIMEOUT_MS} ms:\n${stdout}\n${stderr}`);
    }
    await sleep(200);
  }
}

/** SIGTERM, then the exit (or a timeout error, after which the process is killed). */
export async function stop(served: Served): Promise<Exit> {
  served.child.kill('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), STOP_TIMEOUT_MS)));
  const result = await Promise.race([served.exited, timeout]);
  clearTimeout(timer);
  if (result === 'timeout') {
    served.child.kill('SIGKILL');
    throw new Error(`agenthub serve did not exit within ${STOP_TIMEOUT_MS} ms of SIGTERM`);
  }
  return result;
}

/** Whatever is still running gets SIGTERM, and SIGKILL if it outstays the grace period. */
export async function stopAll(): Promise<void> {
  await Promise.all([...running].map((child) => stop({ child, exited: exitOf(child), output: () => ({ stdout: '', stderr: '' }) }).catch(() => undefined)));
}
