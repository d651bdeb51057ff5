import { spawn, type ChildProcess } from 'node:child_process';
import { chmod, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The `agenthub` command as an operator uses it: the built process (`npm run build` first),
 * `serve all` on an embedded data directory (PGlite, in-process kv; no DATABASE_URL/REDIS_URL),
 * and the administration commands against it over HTTP. One hub start, one restart.
 */

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const BIN = join('services', 'hub', 'bin', 'agenthub.js');

const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 10_000;
const COMMAND_TIMEOUT_MS = 30_000;
const HOOK_TIMEOUT_MS = START_TIMEOUT_MS + STOP_TIMEOUT_MS + 10_000;

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

interface CommandResult extends Exit {
  stdout: string;
  stderr: string;
}

interface Served {
  child: ChildProcess;
  exited: Promise<Exit>;
  output(): { stdout: string; stderr: string };
}

/** The environment of this test, minus anything that would point the hub at other backends. */
function baseEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (/^(HUB_|DATABASE_|REDIS_|GRPC_|IDENTITY_|WORKSPACE_|LOG_LEVEL$|NODE_OPTIONS$)/.test(key)) continue;
    env[key] = value;
  }
  return { ...env, LOG_LEVEL: 'warn', ...extra };
}

function spawnBin(args: string[], env: Record<string, string>, stdin: 'ignore' | 'pipe' = 'ignore'): ChildProcess {
  return spawn(process.execPath, [BIN, ...args], { cwd: ROOT, env: baseEnv(env), stdio: [stdin, 'pipe', 'pipe'] });
}

function exitOf(child: ChildProcess): Promise<Exit> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve({ code: child.exitCode, signal: child.signalCode });
    else child.once('exit', (code, signal) => resolve({ code, signal }));
  });
}

/** Runs one `agenthub` command to completion. */
async function agenthub(args: string[], env: Record<string, string>, input?: string): Promise<CommandResult> {
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

/** A port nobody listens on right now: bind to 0, read it, let it go. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Starts `agenthub serve all` and waits until GET /readyz answers 200. */
async function serve(env: Record<string, string>, url: string): Promise<Served> {
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
async function stop(served: Served): Promise<Exit> {
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

const running = new Set<ChildProcess>();

describe('agenthub command', () => {
  let port: number;
  let url: string;
  let dataDir: string;
  let env: Record<string, string>;
  let hub: Served;

  /** The agent the first command creates; reused across the file. */
  let alice: { agent_id: string; tenant_id: string; name: string; api_key: string; key_id: string; tenant_created: boolean };
  let workspaceId: string;

  const rpc = async (key: string, method: string, params: unknown = {}) => {
    const response = await fetch(`${url}/a2a`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    });
    return { status: response.status, body: (await response.json()) as { result?: any; error?: { code: number; message: string } } };
  };

  beforeAll(async () => {
    port = await freePort();
    url = `http://127.0.0.1:${port}`;
    dataDir = await mkdtemp(join(tmpdir(), 'agenthub-cli-'));
    env = { HUB_PORT: String(port), HUB_DATA_DIR: dataDir };
    hub = await serve(env, url);
  }, HOOK_TIMEOUT_MS);

  afterAll(async () => {
    // Whatever is still running gets SIGTERM, and SIGKILL if it outstays the grace period.
    await Promise.all([...running].map((child) => stop({ child, exited: exitOf(child), output: () => ({ stdout: '', stderr: '' }) }).catch(() => undefined)));
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  }, HOOK_TIMEOUT_MS);

  describe('serve all', () => {
    it('says on stdout where it listens', () => {
      expect(hub.output().stdout).toContain(`AgentHub is listening on ${url}`);
      expect(hub.output().stdout).toContain('embedded PGlite');
    });

    it('reports ready with every service serving', async () => {
      const response = await fetch(`${url}/readyz`);
      expect(response.status).toBe(200);
      expect(await response.json()).toMatchObject({ status: 'ready' });
    });

    it('keeps the operator token in <HUB_DATA_DIR>/admin-token, readable by its owner only', async () => {
      const path = join(dataDir, 'admin-token');
      expect((await stat(path)).mode & 0o777).toBe(0o600);
      expect((await readFile(path, 'utf8')).trim()).toMatch(/^aht_[A-Za-z0-9_-]{43}$/);
    });
  });

  describe('agents and workspaces', () => {
    it('agents create --json prints one JSON object with the agent and its API key', async () => {
      const result = await agenthub(['agents', 'create', '--tenant', 'acme', '--name', 'a', '--json'], env);
      expect(result).toMatchObject({ code: 0, stderr: '' });
      const lines = result.stdout.trim().split('\n');
      expect(lines).toHaveLength(1);
      alice = JSON.parse(lines[0]!);
      expect(alice).toEqual({
        agent_id: expect.stringMatching(/^agt_/),
        tenant_id: 'acme',
        name: 'a',
        api_key: expect.stringMatching(/^ahk_/),
        key_id: expect.stringMatching(/^key_/),
        tenant_created: true,
      });
    }, COMMAND_TIMEOUT_MS);

    it('prints the key for people without --json, with a warning on stderr', async () => {
      const result = await agenthub(['agents', 'create', '--tenant', 'acme', '--name', 'b'], env);
      expect(result.code).toBe(0);
      expect(result.stdout).toMatch(/^Agent agt_\S+ in tenant acme\nAPI key: ahk_\S+\n$/);
      expect(result.stderr).toContain('Store the API key now');
    }, COMMAND_TIMEOUT_MS);

    it('the printed key creates a workspace owned by that agent', async () => {
      const before = Date.now();
      const reply = await rpc(alice.api_key, 'x-hub/workspace.create', { name: 'From the CLI' });
      expect(reply.status).toBe(200);
      const { workspace } = reply.body.result;
      expect(workspace).toMatchObject({ id: expect.stringMatching(/^ws_[a-z0-9]+$/), owner_agent_id: alice.agent_id, name: 'From the CLI', description: '' });
      expect(typeof workspace.created_at).toBe('number');
      expect(workspace.created_at).toBeGreaterThanOrEqual(before - 5_000);
      expect(workspace.created_at).toBeLessThanOrEqual(Date.now() + 5_000);
      workspaceId = workspace.id;
    });

    it('tenants list names the tenant', async () => {
      const [human, json] = await Promise.all([agenthub(['tenants', 'list'], env), agenthub(['tenants', 'list', '--json'], env)]);
      expect(human.code).toBe(0);
      expect(human.stdout.split('\n')).toContain('acme\tacme');
      expect(JSON.parse(json.stdout).tenants).toEqual([expect.objectContaining({ id: 'acme', name: 'acme' })]);
    }, COMMAND_TIMEOUT_MS);

    it('agents list and agents get show the agent', async () => {
      const [list, get] = await Promise.all([agenthub(['agents', 'list', '--tenant', 'acme'], env), agenthub(['agents', 'get', alice.agent_id], env)]);
      expect(list.code).toBe(0);
      expect(list.stdout.split('\n')).toContain(`${alice.agent_id}\tacme\ta`);
      expect(get.code).toBe(0);
      expect(JSON.parse(get.stdout).agent).toMatchObject({ id: alice.agent_id, tenant_id: 'acme', name: 'a' });
    }, COMMAND_TIMEOUT_MS);
  });

  describe('keys', () => {
    it('creates a second key, lists keys without their secret, and revokes one', async () => {
      const created = await agenthub(['keys', 'create', '--agent', alice.agent_id, '--json'], env);
      expect(created.code).toBe(0);
      const second = JSON.parse(created.stdout) as { key: { id: string; prefix: string }; api_key: string };
      expect(second.api_key).toMatch(/^ahk_/);
      expect(second.key.id).toMatch(/^key_/);
      expect((await rpc(second.api_key, 'x-hub/workspace.list')).status).toBe(200);

      const listings = await Promise.all([agenthub(['keys', 'list', '--agent', alice.agent_id], env), agenthub(['keys', 'list', '--agent', alice.agent_id, '--json'], env)]);
      for (const listed of listings) {
        expect(listed.code).toBe(0);
        expect(listed.stdout).not.toContain(alice.api_key);
        expect(listed.stdout).not.toContain(second.api_key);
        expect(listed.stdout).toContain(alice.key_id);
        expect(listed.stdout).toContain(second.key.id);
        expect(listed.stdout).toContain(alice.api_key.slice(0, 12));
      }

      const revoked = await agenthub(['keys', 'revoke', second.key.id], env);
      expect(revoked.code).toBe(0);
      expect(revoked.stdout.trim()).toBe(`Revoked ${second.key.id}`);

      expect((await rpc(second.api_key, 'x-hub/workspace.list')).status).toBe(401);
      expect((await rpc(alice.api_key, 'x-hub/workspace.list')).status).toBe(200);
      const after = await agenthub(['keys', 'list', '--agent', alice.agent_id], env);
      expect(after.stdout.split('\n')).toEqual(
        expect.arrayContaining([expect.stringMatching(new RegExp(`^${second.key.id}\\t.*\\trevoked$`)), expect.stringMatching(new RegExp(`^${alice.key_id}\\t.*\\tactive$`))]),
      );
    }, 4 * COMMAND_TIMEOUT_MS);
  });

  describe('bad usage', () => {
    it('refuses an unknown command with a message on stderr', async () => {
      const result = await agenthub(['frobnicate', 'now'], env);
      expect(result.code).not.toBe(0);
      expect(result.stderr).toContain('Unknown command "frobnicate now"');
      expect(result.stdout).toBe('');
    }, COMMAND_TIMEOUT_MS);

    // A typo must be reported as such, not as a missing operator token, on a machine with no hub.
    it('refuses an unknown command as unknown even where no operator token is found', async () => {
      const empty = await mkdtemp(join(tmpdir(), 'agenthub-cli-empty-'));
      try {
        const result = await agenthub(['frobnicate'], { HUB_PORT: String(port), HUB_DATA_DIR: empty });
        expect(result.code).not.toBe(0);
        expect(result.stderr).toContain('Unknown command');
      } finally {
        await rm(empty, { recursive: true, force: true });
      }
    }, COMMAND_TIMEOUT_MS);

    it('refuses unknown options and missing arguments', async () => {
      const [option, missing] = await Promise.all([agenthub(['tenants', 'list', '--bogus'], env), agenthub(['agents', 'create', '--tenant', 'acme'], env)]);
      expect(option.code).not.toBe(0);
      expect(option.stderr).toContain("Unknown option '--bogus'");
      expect(missing.code).not.toBe(0);
      expect(missing.stderr).toContain('Missing --name');
    }, 2 * COMMAND_TIMEOUT_MS);

    it('says the hub refused a wrong operator token', async () => {
      const wrong = join(dataDir, 'wrong-token');
      await writeFile(wrong, 'wrong\n', { mode: 0o600 });
      const result = await agenthub(['tenants', 'list', '--token-file', wrong], env);
      expect(result.code).not.toBe(0);
      expect(result.stderr).toContain('The hub refused the operator token');
      expect(result.stdout).toBe('');
    }, COMMAND_TIMEOUT_MS);

    // Issue 12 item 7: an argument is in every local user's process list.
    it('takes the operator token from a file or standard input, never from the command line', async () => {
      const token = (await readFile(join(dataDir, 'admin-token'), 'utf8')).trim();
      const onArgv = await agenthub(['tenants', 'list', '--token', token], env);
      expect(onArgv.code).not.toBe(0);
      expect(onArgv.stderr).toContain('--token-file');
      expect(onArgv.stdout).toBe('');
      const fromStdin = await agenthub(['tenants', 'list', '--token-file', '-', '--json'], { ...env, HUB_DATA_DIR: join(dataDir, 'elsewhere') }, `${token}\n`);
      expect(fromStdin.code).toBe(0);
      expect(JSON.parse(fromStdin.stdout).tenants).toEqual(expect.arrayContaining([expect.objectContaining({ id: 'acme' })]));
    }, 2 * COMMAND_TIMEOUT_MS);

    // Issue 12 item 7: PGlite clusters, WAL and event log were 0666 in 0755 folders.
    it('keeps the data directory and every file in it private to the hub\'s user', async () => {
      const open: string[] = [];
      const walk = async (path: string): Promise<void> => {
        const info = await stat(path);
        const limit = info.isDirectory() ? 0o700 : 0o600;
        if (info.mode & 0o077 || (info.mode & 0o777 & ~limit)) open.push(`${path} 0${(info.mode & 0o777).toString(8)}`);
        if (info.isDirectory()) for (const entry of await readdir(path)) await walk(join(path, entry));
      };
      await walk(dataDir);
      // The test's own wrong-token file is written 0600 above; everything else is the hub's.
      expect(open).toEqual([]);
      expect((await stat(dataDir)).mode & 0o777).toBe(0o700);
      expect((await readdir(join(dataDir, 'messaging', 'pgdata'))).length).toBeGreaterThan(0);
    }, COMMAND_TIMEOUT_MS);

    it('reports a hub error with its message and code', async () => {
      const result = await agenthub(['keys', 'revoke', 'key_doesnotexist'], env);
      expect(result.code).not.toBe(0);
      expect(result.stderr).toContain('API key not found');
    }, COMMAND_TIMEOUT_MS);

    it('prints usage for --help and exits 0', async () => {
      const result = await agenthub(['--help'], {});
      expect(result.code).toBe(0);
      expect(result.stdout).toContain('agenthub agents create --tenant <tenant-id> --name <name>');
    }, COMMAND_TIMEOUT_MS);
  });

  describe('restart', () => {
    it('exits 0 on SIGTERM and keeps workspaces, keys and the operator token across a restart', async () => {
      const tokenBefore = await readFile(join(dataDir, 'admin-token'), 'utf8');
      const started = Date.now();
      expect(await stop(hub)).toEqual({ code: 0, signal: null });
      expect(Date.now() - started).toBeLessThan(STOP_TIMEOUT_MS);
      // Issue 12 item 7: a data directory and token file others could read are repaired, with a warning.
      await chmod(dataDir, 0o755);
      await chmod(join(dataDir, 'admin-token'), 0o644);

      hub = await serve(env, url);
      expect(hub.output().stdout).toContain(`AgentHub is listening on ${url}`);
      expect(await readFile(join(dataDir, 'admin-token'), 'utf8')).toBe(tokenBefore);
      expect((await stat(dataDir)).mode & 0o777).toBe(0o700);
      expect((await stat(join(dataDir, 'admin-token'))).mode & 0o777).toBe(0o600);
      expect(hub.output().stdout).toContain('data directory was open to other local users');
      expect(hub.output().stdout).toContain('operator token file was open to other local users');

      const listed = await rpc(alice.api_key, 'x-hub/workspace.list');
      expect(listed.status).toBe(200);
      expect(listed.body.result.workspaces).toEqual([expect.objectContaining({ id: workspaceId, owner_agent_id: alice.agent_id, role: 'admin' })]);

      const tenants = await agenthub(['tenants', 'list'], env);
      expect(tenants.code).toBe(0);
      expect(tenants.stdout).toContain('acme');
    }, HOOK_TIMEOUT_MS);
  });

  describe('configuration errors', () => {
    it('exits with code 2 naming HUB_PORT when it is not a port', async () => {
      const result = await agenthub(['serve', 'all'], { HUB_PORT: 'notaport', HUB_DATA_DIR: dataDir });
      expect(result.code).toBe(2);
      expect(result.stderr).toContain('HUB_PORT');
    }, COMMAND_TIMEOUT_MS);
  });
});
