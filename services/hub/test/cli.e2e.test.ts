import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { agenthub, COMMANDS_TIMEOUT_MS, freePort, HOOK_TIMEOUT_MS, serve, stop, stopAll, STOP_TIMEOUT_MS, type Served } from './bin.js';

/**
 * The `agenthub` command as an operator uses it: the built process (`npm run build` first),
 * `serve all` on an embedded data directory (PGlite, in-process kv; no DATABASE_URL/REDIS_URL),
 * and the administration commands against it over HTTP. One hub start, one restart.
 */

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
    await stopAll();
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
    }, COMMANDS_TIMEOUT_MS);

    it('prints the key for people without --json, with a warning on stderr', async () => {
      const result = await agenthub(['agents', 'create', '--tenant', 'acme', '--name', 'b'], env);
      expect(result.code).toBe(0);
      expect(result.stdout).toMatch(/^Agent agt_\S+ in tenant acme\nAPI key: ahk_\S+\n$/);
      expect(result.stderr).toContain('Store the API key now');
    }, COMMANDS_TIMEOUT_MS);

    // Issue 12: push endpoints are checked against the egress policy; push agents get a push secret.
    it('agents create --endpoint refuses a loopback endpoint naming endpoint_url; a push agent gets a push secret the operator can rotate', async () => {
      const refused = await agenthub(['agents', 'create', '--tenant', 'acme', '--name', 'local', '--endpoint', 'http://127.0.0.1:9/a2a'], env);
      expect(refused.code).not.toBe(0);
      expect(refused.stdout).toBe('');
      expect(refused.stderr).toContain('endpoint_url is refused: it names a loopback address');

      const created = await agenthub(['agents', 'create', '--tenant', 'acme', '--name', 'pushed', '--endpoint', 'http://93.184.216.34/a2a', '--json'], env);
      expect(created).toMatchObject({ code: 0, stderr: '' });
      const pushed = JSON.parse(created.stdout);
      expect(pushed.push_secret).toMatch(/^ahp_[A-Za-z0-9_-]{43}$/);
      const rotated = await agenthub(['agents', 'rotate-push-secret', pushed.agent_id], env);
      expect(rotated.code).toBe(0);
      expect(rotated.stdout).toMatch(/^Push secret: ahp_[A-Za-z0-9_-]{43}\n$/);
      expect(rotated.stdout).not.toContain(pushed.push_secret);
    }, COMMANDS_TIMEOUT_MS);

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
    }, COMMANDS_TIMEOUT_MS);

    it('tenants limits overrides some of a tenant’s rate limits and resets them', async () => {
      const set = await agenthub(['tenants', 'limits', 'acme', '--key', '50/100', '--max-waiting', '7'], env);
      expect(set.code).toBe(0);
      expect(set.stdout).toContain('per key:     50/s, burst 100 (override)');
      expect(set.stdout).toContain('waiting calls per agent: 7 (override)');
      const shown = JSON.parse((await agenthub(['tenants', 'limits', 'acme', '--tenant-rate', '500/900', '--json'], env)).stdout);
      expect(shown.overrides).toEqual({ key: { per_sec: 50, burst: 100 }, tenant: { per_sec: 500, burst: 900 }, max_waiting_per_agent: 7 });
      const quotas = await agenthub(['tenants', 'limits', 'acme', '--quota', 'members_per_workspace=50', '--quota', 'agents_per_tenant=20'], env);
      expect(quotas.code).toBe(0);
      expect(quotas.stdout).toContain('quota members_per_workspace: 50 (override)');
      expect(quotas.stdout).toContain('quota queued_deliveries_per_agent: 10000\n');
      // A later --quota keeps the earlier ones and the other overrides.
      const more = JSON.parse((await agenthub(['tenants', 'limits', 'acme', '--quota', 'agents_per_tenant=30', '--json'], env)).stdout);
      expect(more.overrides).toMatchObject({ max_waiting_per_agent: 7, quotas: { members_per_workspace: 50, agents_per_tenant: 30 } });
      const badQuota = await agenthub(['tenants', 'limits', 'acme', '--quota', 'members'], env);
      expect(badQuota.code).toBe(2);
      expect(badQuota.stderr).toContain('--quota must be <name>=<n>');
      const unknownQuota = await agenthub(['tenants', 'limits', 'acme', '--quota', 'bananas=3'], env);
      expect(unknownQuota.code).toBe(1);
      const bad = await agenthub(['tenants', 'limits', 'acme', '--key', 'fast'], env);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toBe('agenthub: --key fast: expected <per-sec>/<burst>, e.g. 50/100. See agenthub tenants limits --help.\n');
      const help = await agenthub(['tenants', 'limits', '--help'], { HUB_PORT: '1' });
      expect(help).toMatchObject({ code: 0, stderr: '' });
      expect(help.stdout).toMatch(/^agenthub tenants limits <tenant-id> \[--key <per-sec>\/<burst>\]/);
      expect(help.stdout).toContain('--reset first drops every override');
      const reset = JSON.parse((await agenthub(['tenants', 'limits', 'acme', '--reset', '--json'], env)).stdout);
      expect(reset.overrides).toEqual({});
      const usage = await agenthub(['tenants', 'usage', 'acme'], env);
      expect(usage.code).toBe(0);
      expect(usage.stdout.split('\n')).toContain('workspaces_per_tenant\t1 / 1000');
      expect(usage.stdout).toMatch(new RegExp(`^tasks_in_flight_per_sender ${alice.agent_id}\t\\d+ / 1000$`, 'm'));
      for (const quota of ['agents_per_tenant', 'members_per_workspace', 'secrets_per_workspace', 'webhooks_per_workspace', 'webhooks_per_agent', 'queued_deliveries_per_agent']) {
        expect(usage.stdout).toContain(quota);
      }
    }, COMMANDS_TIMEOUT_MS);

    it('agents list and agents get show the agent', async () => {
      const [list, get] = await Promise.all([agenthub(['agents', 'list', '--tenant', 'acme'], env), agenthub(['agents', 'get', alice.agent_id], env)]);
      expect(list.code).toBe(0);
      expect(list.stdout.split('\n')).toContain(`${alice.agent_id}\tacme\ta`);
      expect(get.code).toBe(0);
      expect(JSON.parse(get.stdout).agent).toMatchObject({ id: alice.agent_id, tenant_id: 'acme', name: 'a' });
    }, COMMANDS_TIMEOUT_MS);
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
    }, COMMANDS_TIMEOUT_MS);
  });

  describe('bad usage', () => {
    it('refuses an unknown command with a message on stderr', async () => {
      const result = await agenthub(['frobnicate', 'now'], env);
      expect(result.code).not.toBe(0);
      expect(result.stderr).toContain('Unknown command "frobnicate now"');
      expect(result.stdout).toBe('');
    }, COMMANDS_TIMEOUT_MS);

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
    }, COMMANDS_TIMEOUT_MS);

    it('refuses unknown options and missing arguments', async () => {
      const [option, missing] = await Promise.all([agenthub(['tenants', 'list', '--bogus'], env), agenthub(['agents', 'create', '--tenant', 'acme'], env)]);
      expect(option.code).not.toBe(0);
      expect(option.stderr).toContain("Unknown option '--bogus'");
      expect(missing.code).not.toBe(0);
      expect(missing.stderr).toContain('Missing --name');
    }, COMMANDS_TIMEOUT_MS);

    it('says the hub refused a wrong operator token', async () => {
      const wrong = join(dataDir, 'wrong-token');
      await writeFile(wrong, 'wrong\n', { mode: 0o600 });
      const result = await agenthub(['tenants', 'list', '--token-file', wrong], env);
      expect(result.code).not.toBe(0);
      expect(result.stderr).toContain('The hub refused the operator token');
      expect(result.stdout).toBe('');
    }, COMMANDS_TIMEOUT_MS);

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
    }, COMMANDS_TIMEOUT_MS);

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
    }, COMMANDS_TIMEOUT_MS);

    it('reports a hub error with its message and code', async () => {
      const result = await agenthub(['keys', 'revoke', 'key_doesnotexist'], env);
      expect(result.code).not.toBe(0);
      expect(result.stderr).toContain('API key not found');
    }, COMMANDS_TIMEOUT_MS);

    it('prints usage for --help and exits 0', async () => {
      const result = await agenthub(['--help'], {});
      expect(result.code).toBe(0);
      expect(result.stdout).toContain('agenthub agents create --tenant <tenant-id> --name <name>');
    }, COMMANDS_TIMEOUT_MS);

    it('prints one command\'s help with its options and exit codes, needing no hub', async () => {
      const result = await agenthub(['agents', 'create', '--help'], { HUB_PORT: '1' });
      expect(result).toMatchObject({ code: 0, stderr: '' });
      expect(result.stdout).toMatch(/^agenthub agents create --tenant <tenant-id> --name <name> \[--id <agent-id>\] \[--endpoint <url>\]/);
      expect(result.stdout).toContain('--skill <id>:<name>[:<description>]');
      expect(result.stdout).toContain('Exit codes: 0 done, 1 the hub refused or failed the command (or left work undone), 2 bad usage.');
      expect(result.stdout).not.toContain('agenthub keys revoke');
      const serve = await agenthub(['serve', '--help'], {});
      expect(serve.code).toBe(0);
      expect(serve.stdout).toContain('3 a port is taken');
    }, COMMANDS_TIMEOUT_MS);

    it('prints the version of package.json for --version', async () => {
      const { version } = JSON.parse(await readFile(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };
      const result = await agenthub(['--version'], {});
      expect(result).toMatchObject({ code: 0, stdout: `${version}\n`, stderr: '' });
    }, COMMANDS_TIMEOUT_MS);

    it('exits 2 for bad usage and 1 when the hub refuses, pointing at --help for the former', async () => {
      const [unknown, missing, refused] = await Promise.all([
        agenthub(['frobnicate', 'now'], env),
        agenthub(['agents', 'create', '--tenant', 'acme'], env),
        agenthub(['keys', 'revoke', 'key_doesnotexist'], env),
      ]);
      expect(unknown.code).toBe(2);
      expect(unknown.stderr).toBe('agenthub: Unknown command "frobnicate now". See agenthub --help.\n');
      expect(missing.code).toBe(2);
      expect(missing.stderr).toBe('agenthub: Missing --name. See agenthub agents create --help.\n');
      expect(refused.code).toBe(1);
    }, COMMANDS_TIMEOUT_MS);
  });

  describe('long jobs', () => {
    it('memories reembed and secrets rotate-kek show progress on stderr, the result on stdout', async () => {
      for (const content of ['The sky is blue', 'Grass is green']) {
        expect((await rpc(alice.api_key, 'x-hub/workspace.store', { workspace_id: workspaceId, content })).body.result.memory.content).toBe(content);
      }
      const reembed = await agenthub(['memories', 'reembed', '--workspace', workspaceId, '--json'], env);
      expect(reembed.code).toBe(0);
      expect(reembed.stderr).toMatch(new RegExp(`^Re-embedding the memories of ${workspaceId}…\nRe-embedded 0 memories with \\S+, 0 left\n$`));
      expect(JSON.parse(reembed.stdout)).toMatchObject({ workspace_id: workspaceId, reembedded: 0, remaining: 0 });

      const rotate = await agenthub(['secrets', 'rotate-kek'], env);
      expect(rotate.code).toBe(0);
      expect(rotate.stderr).toBe('Rewrapping workspace data keys under the newest KEK…\n');
      expect(rotate.stdout).toMatch(/^Rewrapped \d+ data key\(s\) under KEK v1; \d+ in all\n$/);
    }, COMMANDS_TIMEOUT_MS);

    it('secrets rotate-key re-seals one workspace and exits 0; bad usage exits 2, a refusal 1 (README exit codes)', async () => {
      const set = await rpc(alice.api_key, 'x-hub/workspace.secrets.set', { workspace_id: workspaceId, key: 'ROTATED', value: 'still-readable' });
      expect(set.body.result.key).toBe('ROTATED');
      const rotated = await agenthub(['secrets', 'rotate-key', '--workspace', workspaceId], env);
      expect(rotated.code).toBe(0);
      expect(rotated.stdout).toMatch(new RegExp(`^Workspace ${workspaceId}: data key generation \\d+, 1 secret\\(s\\) re-sealed\n$`));
      expect((await rpc(alice.api_key, 'x-hub/workspace.secrets.get', { workspace_id: workspaceId, key: 'ROTATED' })).body.result.value).toBe('still-readable');
      const [missing, unreachable, unknown] = await Promise.all([
        agenthub(['secrets', 'rotate-key'], env),
        agenthub(['secrets', 'rotate-key', '--workspace', workspaceId], { ...env, HUB_PORT: String(await freePort()) }),
        agenthub(['secrets', 'rotate-key', '--workspace', 'ws_doesnotexist'], env),
      ]);
      expect(missing).toMatchObject({ code: 2, stderr: 'agenthub: Missing --workspace. See agenthub secrets rotate-key --help.\n' });
      expect(unreachable.code).toBe(1);
      // A workspace that does not exist is a refusal, not "no secrets to rotate".
      expect(unknown).toMatchObject({ code: 1, stdout: '' });
      expect(unknown.stderr).toContain('Workspace not found');
    }, COMMANDS_TIMEOUT_MS);

    it('memories reembed exits 2 without --workspace and 1 for another model or an unknown workspace (README exit codes)', async () => {
      const [missing, otherModel, unknown] = await Promise.all([
        agenthub(['memories', 'reembed'], env),
        agenthub(['memories', 'reembed', '--workspace', workspaceId, '--model', 'not-the-configured-model'], env),
        agenthub(['memories', 'reembed', '--workspace', 'ws_doesnotexist'], env),
      ]);
      expect(missing).toMatchObject({ code: 2, stderr: 'agenthub: Missing --workspace. See agenthub memories reembed --help.\n' });
      expect(otherModel.code).toBe(1);
      expect(otherModel.stdout).toBe('');
      expect(unknown.code).toBe(1);
      // Nothing was changed by the refused run: the memories are still found.
      const listed = await rpc(alice.api_key, 'x-hub/workspace.memories', { workspace_id: workspaceId });
      expect(listed.body.result.memories.map((m: { content: string }) => m.content)).toEqual(expect.arrayContaining(['The sky is blue', 'Grass is green']));
    }, COMMANDS_TIMEOUT_MS);
  });

  // README: `memories reembed` "Exits 1 if memories remain". A hub leaves memories only when a
  // call makes no progress (its deadline came first), which a real hub does not do on cue; a stub
  // of POST /admin answers as such a hub would, call after call.
  describe('memories reembed with memories left', () => {
    const reembedAgainst = async (answers: Record<string, unknown>[]) => {
      const calls: unknown[] = [];
      const stub = createServer((request, response) => {
        let body = '';
        request.on('data', (chunk: Buffer) => (body += chunk));
        request.on('end', () => {
          const { id, method, params } = JSON.parse(body) as { id: number; method: string; params: unknown };
          calls.push({ method, params });
          const result = { workspace_id: 'ws_stub', model: 'm2', dimensions: 3, dropped_models: [], ...answers[calls.length - 1] };
          response.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id, result }));
        });
      });
      await new Promise<void>((resolve) => stub.listen(0, '127.0.0.1', resolve));
      try {
        const { port: stubPort } = stub.address() as AddressInfo;
        const result = await agenthub(['memories', 'reembed', '--workspace', 'ws_stub', '--url', `http://127.0.0.1:${stubPort}`], { HUB_ADMIN_TOKEN: 'stub-operator-token' });
        return { ...result, calls };
      } finally {
        stub.close();
      }
    };

    it('carries on while calls make progress, and exits 1 when one makes none with memories left', async () => {
      const result = await reembedAgainst([
        { reembedded: 2, remaining: 1 },
        { reembedded: 0, remaining: 1 },
      ]);
      expect(result.calls).toEqual([
        { method: 'memories.reembed', params: { workspace_id: 'ws_stub' } },
        { method: 'memories.reembed', params: { workspace_id: 'ws_stub' } },
      ]);
      expect(result.code).toBe(1);
      expect(result.stdout).toBe('Workspace ws_stub: 2 memories embedded with m2, 1 left (no progress); run again\n');
    }, COMMANDS_TIMEOUT_MS);

    it('exits 0 once none remain, counting every call\'s memories', async () => {
      const result = await reembedAgainst([
        { reembedded: 2, remaining: 1 },
        { reembedded: 1, remaining: 0, dropped_models: ['m1'] },
      ]);
      expect(result.calls).toHaveLength(2);
      expect(result.code).toBe(0);
      expect(result.stdout).toBe('Workspace ws_stub: 3 memories embedded with m2 (3 dimensions); dropped the vectors of m1\n');
    }, COMMANDS_TIMEOUT_MS);
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

  describe('a data key no configured KEK unwraps', () => {
    // README: `secrets rotate-kek` "Exits 1 if a key could not be unwrapped". The hub restarts
    // with a new v2 and a v1 that is not the one the workspace's data key was wrapped with.
    it('secrets rotate-kek reports the key it left as it was and exits 1', async () => {
      expect(await stop(hub)).toEqual({ code: 0, signal: null });
      const kek = () => randomBytes(32).toString('base64');
      hub = await serve({ ...env, HUB_KEKS: `v2:${kek()},v1:${kek()}` }, url);
      const [human, json] = [await agenthub(['secrets', 'rotate-kek'], env), await agenthub(['secrets', 'rotate-kek', '--json'], env)];
      expect(human.code).toBe(1);
      expect(human.stdout).toMatch(/^Rewrapped 0 data key\(s\) under KEK v2; 1 in all\n1 data key\(s\) could not be unwrapped and were left as they were; see the secrets service's log\n$/);
      expect(json.code).toBe(1);
      expect(JSON.parse(json.stdout)).toEqual({ kek_version: 'v2', rewrapped: 0, failed: 1, total: 1 });
    }, HOOK_TIMEOUT_MS + COMMANDS_TIMEOUT_MS);
  });

  describe('configuration errors', () => {
    it('exits with code 2 naming HUB_PORT when it is not a port', async () => {
      const result = await agenthub(['serve', 'all'], { HUB_PORT: 'notaport', HUB_DATA_DIR: dataDir });
      expect(result.code).toBe(2);
      expect(result.stderr).toContain('HUB_PORT');
    }, COMMANDS_TIMEOUT_MS);

    it('refuses an administration command naming HUB_PORT when it is not a port, with no stack trace', async () => {
      const result = await agenthub(['tenants', 'list'], { HUB_PORT: 'notaport', HUB_ADMIN_TOKEN: 'a'.repeat(32) });
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(/^agenthub: Invalid configuration:\n {2}HUB_PORT: /);
      expect(result.stderr).not.toMatch(/\n\s+at /);
    }, COMMANDS_TIMEOUT_MS);
  });
});
