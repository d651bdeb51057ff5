import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { agenthub, COMMAND_TIMEOUT_MS, exitOf, HOOK_TIMEOUT_MS, spawnBin, START_TIMEOUT_MS, stop, type Served } from './bin.js';

/**
 * What a person or a log collector reads from `agenthub serve`, over real child processes whose
 * stdout is a pipe (as under a container runtime): JSON lines by default, readable lines with
 * LOG_FORMAT=pretty, one line per request in development, and a plain message with exit status 3
 * when a port is taken.
 */

const TOKEN = 'operator-token-for-logging-tests';
/** Upstreams nobody answers on: a split gateway starts without them (its readiness says so). */
const NOWHERE = { IDENTITY_ADDR: '127.0.0.1:1', WORKSPACE_ADDR: '127.0.0.1:1', SECRETS_ADDR: '127.0.0.1:1', MESSAGING_ADDR: '127.0.0.1:1', EVENTS_ADDR: '127.0.0.1:1' };

let dataDir: string;
const started: Served[] = [];

/** Starts `agenthub serve <service>` and waits until its stdout matches `ready`. */
async function serveUntil(service: string, env: Record<string, string>, ready: RegExp): Promise<Served> {
  const child = spawnBin(['serve', service], { HUB_DATA_DIR: dataDir, GRPC_PORT: '0', OPS_PORT: '0', LOG_LEVEL: 'info', ...env });
  let stdout = '';
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const served: Served = { child, exited: exitOf(child), output: () => ({ stdout, stderr }) };
  started.push(served);
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve ${service} not ready within ${START_TIMEOUT_MS} ms:\n${stdout}\n${stderr}`)), START_TIMEOUT_MS);
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
      if (ready.test(stdout)) {
        clearTimeout(timer);
        resolve();
      }
    });
    void served.exited.then((exit) => {
      clearTimeout(timer);
      reject(new Error(`serve ${service} exited (${exit.code ?? exit.signal}):\n${stdout}\n${stderr}`));
    });
  });
  return served;
}

/** A port held by another listener for the duration of `body`. */
async function withPortTaken<T>(body: (port: number) => Promise<T>): Promise<T> {
  const holder = net.createServer();
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
  try {
    return await body((holder.address() as net.AddressInfo).port);
  } finally {
    await new Promise((resolve) => holder.close(resolve));
  }
}

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'agenthub-logging-'));
});

afterAll(async () => {
  await Promise.all(started.map((served) => (served.child.exitCode === null ? stop(served).catch(() => undefined) : undefined)));
  await rm(dataDir, { recursive: true, force: true });
}, HOOK_TIMEOUT_MS);

describe('log format', () => {
  it('writes one JSON object per line when stdout is not a terminal', async () => {
    const served = await serveUntil('identity', {}, /ops endpoint listening/);
    expect(await stop(served)).toEqual({ code: 0, signal: null });
    const lines = served.output().stdout.trim().split('\n');
    expect(lines.length).toBeGreaterThan(1);
    for (const line of lines) {
      expect(JSON.parse(line)).toEqual(expect.objectContaining({ level: expect.any(Number), time: expect.any(String), msg: expect.any(String) }));
    }
    expect(lines.map((line) => JSON.parse(line))).toContainEqual(expect.objectContaining({ service: 'identity', msg: 'gRPC service listening' }));
  }, HOOK_TIMEOUT_MS);

  it('writes readable lines with LOG_FORMAT=pretty, uncoloured on a pipe', async () => {
    const served = await serveUntil('identity', { LOG_FORMAT: 'pretty' }, /ops endpoint listening/);
    expect(await stop(served)).toEqual({ code: 0, signal: null });
    const { stdout } = served.output();
    expect(stdout).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO {2}identity gRPC service listening address=127\.0\.0\.1:\d+$/m);
    expect(stdout).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO {2}identity stopping signal=SIGTERM$/m);
    expect(stdout).not.toMatch(/^\{/m);
    expect(stdout).not.toContain('\u001b[');
  }, HOOK_TIMEOUT_MS);

  it('refuses an unknown LOG_FORMAT naming the variable', async () => {
    const result = await agenthub(['serve', 'identity'], { HUB_DATA_DIR: dataDir, LOG_FORMAT: 'xml' });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('LOG_FORMAT');
  }, COMMAND_TIMEOUT_MS);
});

describe('request lines', () => {
  it('logs one concise info line per request in development, with the request id the response carries', async () => {
    const served = await serveUntil(
      'gateway',
      { ...NOWHERE, HUB_ADMIN_TOKEN: TOKEN, HUB_PORT: '0', NODE_ENV: 'development', LOG_FORMAT: 'pretty' },
      /gateway listening url=http:\/\/127\.0\.0\.1:\d+/,
    );
    const url = /gateway listening url=(\S+)/.exec(served.output().stdout)![1]!;
    const health = await fetch(`${url}/healthz`, { headers: { 'X-Request-Id': 'trace-me-42' } });
    expect(health.headers.get('x-request-id')).toBe('trace-me-42');
    const call = await fetch(`${url}/a2a`, { method: 'POST', body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'x-hub/workspace.list' }) });
    expect(call.status).toBe(401);
    const generated = call.headers.get('x-request-id');
    expect(generated).toMatch(/^req_[a-z0-9]{20}$/);
    expect(await stop(served)).toEqual({ code: 0, signal: null });

    const { stdout } = served.output();
    expect(stdout).toMatch(/ INFO {2}gateway GET \/healthz → 200 \(\d+(\.\d)? ms\) request_id=trace-me-42$/m);
    expect(stdout).toMatch(new RegExp(` INFO {2}gateway POST /a2a x-hub/workspace\\.list → 401 -32000 \\(\\d+(\\.\\d)? ms\\) request_id=${generated}$`, 'm'));
  }, HOOK_TIMEOUT_MS);

  it('keeps request lines at debug outside development', async () => {
    const served = await serveUntil('gateway', { ...NOWHERE, HUB_ADMIN_TOKEN: TOKEN, HUB_PORT: '0', NODE_ENV: 'production' }, /gateway listening/);
    const url = (JSON.parse(served.output().stdout.split('\n').find((line) => line.includes('gateway listening'))!) as { url: string }).url;
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    expect(await stop(served)).toEqual({ code: 0, signal: null });
    expect(served.output().stdout).not.toContain('/healthz');
  }, HOOK_TIMEOUT_MS);
});

describe('a port already in use', () => {
  it('the gateway says which variable to change and exits 3, without a stack trace', async () => {
    await withPortTaken(async (port) => {
      const result = await agenthub(['serve', 'gateway'], { ...NOWHERE, HUB_ADMIN_TOKEN: TOKEN, HUB_PORT: String(port), HUB_DATA_DIR: dataDir });
      expect(result.code).toBe(3);
      expect(result.stderr).toBe(`agenthub: Port ${port} is already in use (HUB_PORT); stop whatever holds it or set HUB_PORT to a free port.\n`);
      expect(result.stdout).not.toMatch(/\n\s+at /);
    });
  }, COMMAND_TIMEOUT_MS);

  it('a gRPC service names GRPC_PORT', async () => {
    await withPortTaken(async (port) => {
      const result = await agenthub(['serve', 'identity'], { HUB_DATA_DIR: dataDir, GRPC_PORT: String(port), OPS_PORT: '0' });
      expect(result.code).toBe(3);
      // grpc-js also reports the failed bind on stderr, in its own one-line format.
      expect(result.stderr).toContain(`agenthub: Port ${port} is already in use (GRPC_PORT); stop whatever holds it or set GRPC_PORT to a free port.\n`);
      expect(`${result.stdout}${result.stderr}`).not.toMatch(/\n\s+at /);
    });
  }, HOOK_TIMEOUT_MS);
});
