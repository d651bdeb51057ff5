import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { agenthub, COMMANDS_TIMEOUT_MS, exitOf, HOOK_TIMEOUT_MS, spawnBin, START_TIMEOUT_MS, stop, type Served } from './bin.js';

/**
 * What a person or a log collector reads from `agenthub serve`, over real child processes whose
 * stdout is a pipe (as under a container runtime): JSON lines by default, readable lines with
 * LOG_FORMAT=pretty, one line per request in development, and a plain message with exit status 3
 * when a port is taken.
 */

const TOKEN = 'operator-token-for-logging-tests';
/** Upstreams nobody answers on: a split gateway starts without them (its readiness says so). */
const NOWHERE = { IDENTITY_ADDR: '127.0.0.1:1', WORKSPACE_ADDR: '127.0.0.1:1', SECRETS_ADDR: '127.0.0.1:1', MESSAGING_ADDR: '127.0.0.1:1', EVENTS_ADDR: '127.0.0.1:1' };

/** Split-mode processes refuse to start without the key that signs internal calls. */
const INTERNAL_KEY = { HUB_INTERNAL_KEY: randomBytes(32).toString('base64') };

let dataDir: string;
const started: Served[] = [];

/** Starts `agenthub serve <service>` (its databases in memory: none restarts) and waits until its stdout matches `ready`. */
async function serveUntil(service: string, env: Record<string, string>, ready: RegExp): Promise<Served> {
  const child = spawnBin(['serve', service], { HUB_DATA_DIR: dataDir, HUB_EMBEDDED_STORAGE: 'memory', GRPC_PORT: '0', OPS_PORT: '0', LOG_LEVEL: 'info', ...INTERNAL_KEY, ...env });
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
    const result = await agenthub(['serve', 'identity'], { HUB_DATA_DIR: dataDir, LOG_FORMAT: 'xml', ...INTERNAL_KEY });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('LOG_FORMAT');
  }, COMMANDS_TIMEOUT_MS);
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

  it('logs every -32603 with its cause: a call its upstream cannot take leaves an error line naming the method and why (issue 14 item 5)', async () => {
    const served = await serveUntil('gateway', { ...NOWHERE, HUB_ADMIN_TOKEN: TOKEN, HUB_PORT: '0', LOG_FORMAT: 'json' }, /gateway listening/);
    const url = (JSON.parse(served.output().stdout.split('\n').find((line) => line.includes('gateway listening'))!) as { url: string }).url;
    const call = await fetch(`${url}/admin`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tenants.list' }),
    });
    // The caller hears only that the hub failed; the log says where and why.
    expect(((await call.json()) as { error?: { code: number } }).error?.code).toBe(-32603);
    expect(await stop(served)).toEqual({ code: 0, signal: null });
    const lines = served.output().stdout.split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, any>);
    const failed = lines.filter((line) => line.level === 50 && line.method === 'tenants.list');
    expect(failed).toHaveLength(1);
    // The cause: the transport's own words about 127.0.0.1:1 (IDENTITY_ADDR), not just "Internal error".
    expect(JSON.stringify(failed[0]!.err)).toMatch(/ECONNREFUSED|127\.0\.0\.1:1|No connection established/);
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
      const result = await agenthub(['serve', 'gateway'], { ...NOWHERE, ...INTERNAL_KEY, HUB_ADMIN_TOKEN: TOKEN, HUB_PORT: String(port), HUB_DATA_DIR: dataDir });
      expect(result.code).toBe(3);
      expect(result.stderr).toBe(`agenthub: Port ${port} is already in use (HUB_PORT); stop whatever holds it or set HUB_PORT to a free port.\n`);
      expect(result.stdout).not.toMatch(/\n\s+at /);
    });
  }, COMMANDS_TIMEOUT_MS);

  it('a gRPC service names GRPC_PORT', async () => {
    await withPortTaken(async (port) => {
      const result = await agenthub(['serve', 'identity'], { HUB_DATA_DIR: dataDir, GRPC_PORT: String(port), OPS_PORT: '0', ...INTERNAL_KEY });
      expect(result.code).toBe(3);
      // grpc-js also reports the failed bind on stderr, in its own one-line format.
      expect(result.stderr).toContain(`agenthub: Port ${port} is already in use (GRPC_PORT); stop whatever holds it or set GRPC_PORT to a free port.\n`);
      expect(`${result.stdout}${result.stderr}`).not.toMatch(/\n\s+at /);
    });
  }, HOOK_TIMEOUT_MS);
});

describe('logs free of credentials end to end', () => {
  it('a trace-level `serve all` never writes an API key or the operator token, whatever the calls', async () => {
    const token = `operator-${Math.random().toString(36).slice(2)}-logged-never`;
    const served = await serveUntil('all', { HUB_ADMIN_TOKEN: token, HUB_PORT: '0', LOG_LEVEL: 'trace', LOG_FORMAT: 'json', NODE_ENV: 'development' }, /AgentHub is listening on \S+ /);
    const url = /AgentHub is listening on (\S+) /.exec(served.output().stdout)![1]!;
    const rpc = async (path: string, bearer: string | undefined, method: string, params: unknown = {}) => {
      const response = await fetch(`${url}${path}`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', ...(bearer === undefined ? {} : { Authorization: `Bearer ${bearer}` }) },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
      });
      return { status: response.status, body: (await response.json()) as { result?: any; error?: { code: number } } };
    };
    const created = await rpc('/admin', token, 'agents.create', { tenant_id: 'acme', name: 'logged', create_tenant: true });
    expect(created.status).toBe(200);
    const key = created.body.result.api_key as string;
    const second = (await rpc('/admin', token, 'keys.create', { agent_id: created.body.result.agent.id })).body.result.api_key as string;
    expect(key).toMatch(/^ahk_/);
    expect((await rpc('/a2a', key, 'x-hub/workspace.list')).body.result.count).toBe(0);
    // Refusals carry the credentials where a careless log line would echo them.
    expect((await rpc('/a2a', `${key}x`, 'x-hub/workspace.list')).status).toBe(401);
    expect((await rpc('/a2a', token, 'x-hub/workspace.list')).status).toBe(401);
    expect((await rpc('/admin', key, 'tenants.list')).status).toBe(401);
    expect((await rpc('/admin', `${token}x`, 'tenants.list')).status).toBe(401);
    expect((await rpc('/a2a', key, 'x-hub/workspace.create', { name: key, description: token })).body.result.workspace.id).toMatch(/^ws_/);
    expect((await rpc('/a2a', key, 'x-hub/nope', { api_key: key })).body.error?.code).toBe(-32601);
    const keyId = created.body.result.key.id as string;
    expect((await rpc('/admin', token, 'keys.revoke', { key_id: keyId })).status).toBe(200);
    expect((await rpc('/a2a', key, 'x-hub/workspace.list')).status).toBe(401);
    expect((await rpc('/a2a', second, 'x-hub/workspace.list')).status).toBe(200);
    expect(await stop(served)).toEqual({ code: 0, signal: null });

    const { stdout, stderr } = served.output();
    // The log did record the calls (trace level, one line per request), so its silence about keys means something.
    expect(stdout).toContain('x-hub/workspace.list');
    const log = stdout + stderr;
    for (const secret of [key, second, token, key.slice(4), token.slice(0, 16)]) expect(log).not.toContain(secret);
  }, HOOK_TIMEOUT_MS);
});
