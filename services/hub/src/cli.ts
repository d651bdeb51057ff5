#!/usr/bin/env node
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import type { HubConfig, Logger, Stop } from '@agenthub/runtime';
import type { CliConfig } from '@agenthub/runtime/config';
import { AdminClient, AdminError } from './admin-client.js';
import { readAdminToken } from './admin-token.js';
import { COMMAND_HELP, helpText } from './help.js';
import { Progress } from './progress.js';

/** Exit statuses of the administration commands (`serve` has its own, see runProcess). */
const EXIT = { OK: 0, FAILED: 1, USAGE: 2 } as const;

/** The command line itself is wrong: exit 2 with the message and a pointer to --help. */
class UsageError extends Error {}

type Flags = Record<string, string | string[] | boolean | undefined>;

type Main = (config: HubConfig, log: Logger, fail: (err: Error) => void) => Promise<Stop>;

/** Loaded only for `serve`, so operator commands start fast. */
const services: Record<string, () => Promise<Main>> = {
  all: async () => startAll,
  gateway: async () => (await import('@agenthub/gateway/main')).main,
  identity: async () => (await import('@agenthub/identity/main')).main,
  workspace: async () => (await import('@agenthub/workspace/main')).main,
  secrets: async () => (await import('@agenthub/secrets/main')).main,
  messaging: async () => (await import('@agenthub/messaging/main')).main,
  events: async () => (await import('@agenthub/events/main')).main,
};

async function startAll(config: HubConfig, log: Logger, fail: (err: Error) => void): Promise<Stop> {
  const { startHub } = await import('./index.js');
  const { hubProcesses, startHubInTwoProcesses } = await import('./two-processes.js');
  const processes = hubProcesses(config);
  const hub = processes === 2 ? await startHubInTwoProcesses(config, log, fail) : await startHub(config, log);
  process.stdout.write(`AgentHub is listening on ${hub.url} (data in ${config.HUB_DATA_DIR}; database ${config.DATABASE_URL ? 'PostgreSQL' : config.HUB_EMBEDDED_STORAGE === 'memory' ? 'embedded PGlite in memory, lost on exit' : 'embedded PGlite'}; kv ${config.REDIS_URL ? 'Redis' : 'in-process'}; ${processes === 2 ? 'gateway and services in two processes' : 'one process'})\n`);
  return hub.stop;
}

interface CommandContext {
  admin: AdminClient;
  values: Flags;
  arg: string | undefined;
  print: (result: unknown, human: string) => void;
}

/** Operator commands, each one call of the hub's `POST /admin` endpoint. */
const commands: Record<string, (ctx: CommandContext) => Promise<void>> = {
  'tenants create': async ({ admin, values, arg, print }) => {
    const result = await admin.call<{ tenant: { id: string }; created: boolean }>('tenants.create', {
      tenant_id: need(arg, 'tenant id'),
      ...(values.name ? { name: values.name } : {}),
    });
    print(result, `${result.created ? 'Created' : 'Exists'}: tenant ${result.tenant.id}`);
  },
  'tenants list': async ({ admin, print }) => {
    const result = await admin.call<{ tenants: { id: string; name: string }[] }>('tenants.list');
    print(result, result.tenants.map((t) => `${t.id}\t${t.name}`).join('\n'));
  },
  'tenants usage': async ({ admin, arg, print }) => {
    const result = await admin.call<{ usage: { quota: string; scope: string; used: number; limit: number }[] }>('tenants.usage', { tenant_id: need(arg, 'tenant id') });
    print(result, result.usage.map((u) => `${u.quota}${u.scope ? ` ${u.scope}` : ''}\t${u.used} / ${u.limit}`).join('\n'));
  },
  'tenants limits': async ({ admin, values, arg, print }) => {
    type Rate = { per_sec: number; burst: number };
    type Limits = { key: Rate; tenant: Rate; max_waiting_per_agent: number; quotas: Record<string, number> };
    type View = { tenant_id: string; limits: Limits; overrides: Partial<Limits> };
    const tenantId = need(arg, 'tenant id');
    const changes = {
      ...(values.key !== undefined ? { key: rateFlag(values.key, '--key') } : {}),
      ...(values['tenant-rate'] !== undefined ? { tenant: rateFlag(values['tenant-rate'], '--tenant-rate') } : {}),
      ...(values['max-waiting'] !== undefined ? { max_waiting_per_agent: Number(values['max-waiting']) } : {}),
      ...(Array.isArray(values.quota) ? { quotas: Object.fromEntries(values.quota.map(quotaFlag)) } : {}),
    };
    let result: View;
    if (values.reset) result = await admin.call<View>('tenants.set_limits', { tenant_id: tenantId, limits: changes });
    else if (Object.keys(changes).length) {
      const current = await admin.call<View>('tenants.get_limits', { tenant_id: tenantId });
      const quotas = { ...current.overrides.quotas, ...changes.quotas };
      const merged = { ...current.overrides, ...changes, ...(Object.keys(quotas).length ? { quotas } : {}) };
      result = await admin.call<View>('tenants.set_limits', { tenant_id: tenantId, limits: merged });
    } else result = await admin.call<View>('tenants.get_limits', { tenant_id: tenantId });
    const l = result.limits;
    const mark = (name: keyof Limits) => (name in result.overrides ? ' (override)' : '');
    print(
      result,
      [
        `Tenant ${result.tenant_id}`,
        `per key:     ${l.key.per_sec}/s, burst ${l.key.burst}${mark('key')}`,
        `per tenant:  ${l.tenant.per_sec}/s, burst ${l.tenant.burst}${mark('tenant')}`,
        `waiting calls per agent: ${l.max_waiting_per_agent}${mark('max_waiting_per_agent')}`,
        ...Object.entries(l.quotas).map(([name, n]) => `quota ${name}: ${n}${result.overrides.quotas?.[name] !== undefined ? ' (override)' : ''}`),
      ].join('\n'),
    );
  },
  'agents create': async ({ admin, values }) => {
    const result = await admin.call<{
      agent: { id: string; tenant_id: string; name: string };
      key: { id: string };
      api_key: string;
      tenant_created: boolean;
      push_secret?: string;
    }>(
      'agents.create',
      {
        tenant_id: need(values.tenant, '--tenant'),
        name: need(values.name, '--name'),
        create_tenant: true,
        ...(values.id ? { agent_id: values.id } : {}),
        ...(values.endpoint ? { endpoint_url: values.endpoint } : {}),
        ...(values['output-modes'] ? { output_modes: String(values['output-modes']).split(',').map((m) => m.trim()).filter(Boolean) } : {}),
        ...(values.description ? { description: values.description } : {}),
        ...(Array.isArray(values.skill) ? { skills: values.skill.map(skillFlag) } : {}),
      },
    );
    const flat = {
      agent_id: result.agent.id,
      tenant_id: result.agent.tenant_id,
      name: result.agent.name,
      api_key: result.api_key,
      key_id: result.key.id,
      tenant_created: result.tenant_created,
      ...(result.push_secret ? { push_secret: result.push_secret } : {}),
    };
    if (values.json) process.stdout.write(`${JSON.stringify(flat)}\n`);
    else {
      process.stdout.write(`Agent ${flat.agent_id} in tenant ${flat.tenant_id}${flat.tenant_created ? ' (tenant created)' : ''}\nAPI key: ${flat.api_key}\n`);
      if (flat.push_secret) process.stdout.write(`Push secret: ${flat.push_secret}\n`);
      process.stderr.write('Store the API key now: the hub keeps only its hash and cannot show it again.\n');
      if (flat.push_secret) {
        process.stderr.write('Give the push secret to the agent: the hub sends it as "Authorization: Bearer <secret>" on every call (docs/security.md).\n');
      }
    }
  },
  'agents list': async ({ admin, values, print }) => {
    const result = await admin.call<{ agents: { id: string; tenant_id: string; name: string }[] }>('agents.list', values.tenant ? { tenant_id: values.tenant } : {});
    print(result, result.agents.map((a) => `${a.id}\t${a.tenant_id}\t${a.name}`).join('\n'));
  },
  'agents get': async ({ admin, arg }) => {
    const result = await admin.call('agents.get', { agent_id: need(arg, 'agent id') });
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  },
  'agents rotate-push-secret': async ({ admin, arg, print }) => {
    const result = await admin.call<{ push_secret: string }>('agents.rotate_push_secret', { agent_id: need(arg, 'agent id') });
    print(result, `Push secret: ${result.push_secret}`);
  },
  'keys create': async ({ admin, values, print }) => {
    const result = await admin.call<{ key: { id: string }; api_key: string }>('keys.create', { agent_id: need(values.agent, '--agent') });
    print(result, `Key ${result.key.id}\nAPI key: ${result.api_key}`);
  },
  'keys revoke': async ({ admin, arg, print }) => {
    const result = await admin.call<{ key: { id: string } }>('keys.revoke', { key_id: need(arg, 'key id') });
    print(result, `Revoked ${result.key.id}`);
  },
  'keys list': async ({ admin, values, print }) => {
    const result = await admin.call<{ keys: { id: string; prefix: string; revoked_at: number | null }[] }>('keys.list', { agent_id: need(values.agent, '--agent') });
    print(result, result.keys.map((k) => `${k.id}\t${k.prefix}…\t${k.revoked_at ? 'revoked' : 'active'}`).join('\n'));
  },
  'secrets rotate-kek': async ({ admin, print }) => {
    // One call on the hub's side; the display says it is working while it rewraps.
    const progress = new Progress(process.stderr);
    progress.working('Rewrapping workspace data keys under the newest KEK');
    const result = await admin
      .call<{ kek_version: string; rewrapped: number; failed: number; total: number }>('secrets.rotate_kek')
      .finally(() => progress.done());
    const failed = result.failed
      ? `\n${result.failed} data key(s) could not be unwrapped and were left as they were; see the secrets service's log`
      : '';
    print(result, `Rewrapped ${result.rewrapped} data key(s) under KEK ${result.kek_version}; ${result.total} in all${failed}`);
    if (result.failed) process.exitCode = EXIT.FAILED;
  },
  'secrets rotate-key': async ({ admin, values, print }) => {
    const result = await admin.call<{ workspace_id: string; generation: number; resealed: number }>('secrets.rotate_workspace_key', {
      workspace_id: need(values.workspace, '--workspace'),
    });
    print(
      result,
      result.generation
        ? `Workspace ${result.workspace_id}: data key generation ${result.generation}, ${result.resealed} secret(s) re-sealed`
        : `Workspace ${result.workspace_id} has no secrets, so no data key to rotate`,
    );
  },
  'memories reembed': async ({ admin, values, print }) => {
    type Reembed = { workspace_id: string; model: string; dimensions: number; reembedded: number; remaining: number; dropped_models: string[] };
    const params = { workspace_id: need(values.workspace, '--workspace'), ...(values.model ? { model: values.model } : {}) };
    // Each call works until its deadline nears; carry on while it reports progress.
    const progress = new Progress(process.stderr);
    progress.working(`Re-embedding the memories of ${params.workspace_id}`);
    let total = 0;
    let result: Reembed;
    try {
      do {
        result = await admin.call<Reembed>('memories.reembed', params);
        total += result.reembedded;
        progress.done();
        progress.update(`Re-embedded ${total} memories with ${result.model}, ${result.remaining} left`);
      } while (result.remaining > 0 && result.reembedded > 0);
    } finally {
      progress.done();
    }
    const summary = { ...result, reembedded: total };
    const dropped = summary.dropped_models.length ? `; dropped the vectors of ${summary.dropped_models.join(', ')}` : '';
    print(
      summary,
      summary.remaining
        ? `Workspace ${summary.workspace_id}: ${total} memories embedded with ${summary.model}, ${summary.remaining} left (no progress); run again`
        : `Workspace ${summary.workspace_id}: ${total} memories embedded with ${summary.model} (${summary.dimensions} dimensions)${dropped}`,
    );
    if (summary.remaining) process.exitCode = EXIT.FAILED;
  },
};

async function run(argv: string[]): Promise<void> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      json: { type: 'boolean' },
      url: { type: 'string' },
      token: { type: 'string' },
      'token-file': { type: 'string' },
      tenant: { type: 'string' },
      name: { type: 'string' },
      id: { type: 'string' },
      endpoint: { type: 'string' },
      'output-modes': { type: 'string' },
      description: { type: 'string' },
      skill: { type: 'string', multiple: true },
      agent: { type: 'string' },
      workspace: { type: 'string' },
      model: { type: 'string' },
      key: { type: 'string' },
      'tenant-rate': { type: 'string' },
      'max-waiting': { type: 'string' },
      quota: { type: 'string', multiple: true },
      reset: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
      version: { type: 'boolean', short: 'v' },
    },
  });
  const [group, action, arg] = positionals;
  if (values.version) {
    process.stdout.write(`${await version()}\n`);
    return;
  }
  if (values.help || !group) {
    process.stdout.write(`${helpText(await version(), group, group === 'serve' ? undefined : action)}\n`);
    return;
  }
  if (group === 'serve') {
    const load = services[action ?? 'all'];
    if (!load) throw new UsageError(`Unknown service "${action}"; choose ${Object.keys(services).join(', ')}`);
    const { runProcess } = await import('@agenthub/runtime');
    // Whatever the hub writes (PGlite clusters, WAL, event log, token and KEK files) is its
    // user's alone, whichever library creates the file.
    process.umask(0o077);
    await runProcess(action ?? 'all', await load());
    return;
  }
  const command = commands[`${group} ${action}`];
  if (!command) throw new UsageError(`Unknown command "${positionals.join(' ')}"`);
  const admin = new AdminClient(await hubUrl(values), await operatorToken(values));
  const print = (result: unknown, human: string) =>
    process.stdout.write(values.json ? `${JSON.stringify(result, null, 2)}\n` : `${human}\n`);

  await command({ admin, values, arg, print });
}

/** `--skill id:name[:description]`; the description may itself hold colons. */
function skillFlag(value: string): { id: string; name: string; description: string } {
  const [id = '', name = '', ...rest] = value.split(':');
  if (!id || !name) throw new UsageError(`--skill ${value}: expected <id>:<name>[:<description>]`);
  return { id, name, description: rest.join(':') };
}

/** `<per-sec>/<burst>`, e.g. `50/100`; the hub checks the numbers. */
/** `--quota <name>=<n>`: one quota override. */
function quotaFlag(value: string): [string, number] {
  const match = /^([a-z_]+)=(\d+)$/.exec(value);
  if (!match) throw new UsageError(`--quota must be <name>=<n>, e.g. members_per_workspace=50 (got ${value})`);
  return [match[1]!, Number(match[2])];
}

function rateFlag(value: Flags[string], flag: string): { per_sec: number; burst: number } {
  const match = typeof value === 'string' ? /^([0-9.]+)\/([0-9]+)$/.exec(value.trim()) : null;
  if (!match) throw new UsageError(`${flag} ${String(value)}: expected <per-sec>/<burst>, e.g. 50/100`);
  return { per_sec: Number(match[1]), burst: Number(match[2]) };
}

function need(value: Flags[string], what: string): string {
  if (typeof value !== 'string' || value === '') throw new UsageError(`Missing ${what}`);
  return value;
}

/** HUB_URL, HUB_PORT, HUB_DATA_DIR, HUB_ADMIN_TOKEN, parsed by the hub's own config module. */
async function cliConfig(): Promise<CliConfig> {
  const { ConfigError, loadCliConfig } = await import('@agenthub/runtime/config');
  try {
    return loadCliConfig();
  } catch (err) {
    if (err instanceof ConfigError) throw new AdminError(err.message);
    throw err;
  }
}

async function hubUrl(values: Flags): Promise<string> {
  if (typeof values.url === 'string') return values.url;
  const config = await cliConfig();
  return config.HUB_URL ?? `http://127.0.0.1:${config.HUB_PORT}`;
}

async function operatorToken(values: Flags): Promise<string> {
  if (values.token !== undefined) {
    throw new UsageError('--token would show the operator token to every local user (the process list); use --token-file <path>, --token-file - (standard input) or HUB_ADMIN_TOKEN');
  }
  if (typeof values['token-file'] === 'string') {
    const path = values['token-file'];
    const text = path === '-' ? await readStdin() : await readFile(path, 'utf8').catch(() => {
      throw new AdminError(`Cannot read the operator token from ${path}`);
    });
    const token = text.trim();
    if (!token) throw new AdminError(`No operator token in ${path === '-' ? 'standard input' : path}`);
    return token;
  }
  const config = await cliConfig();
  if (config.HUB_ADMIN_TOKEN) return config.HUB_ADMIN_TOKEN;
  const dataDir = config.HUB_DATA_DIR;
  const token = await readAdminToken(dataDir);
  if (!token) {
    throw new AdminError(`No operator token: set HUB_ADMIN_TOKEN, or run from the folder where the hub keeps ${dataDir}/admin-token`);
  }
  return token;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** The hub's version, from the package.json at the top of the install. */
async function version(): Promise<string> {
  const manifest = JSON.parse(await readFile(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };
  return manifest.version;
}

/** `--help` for the command being typed, as far as it names one. */
function helpHint(argv: string[]): string {
  const words = argv.filter((word) => !word.startsWith('-')).slice(0, 2);
  while (words.length && !COMMAND_HELP[words.join(' ')] && !Object.keys(COMMAND_HELP).some((name) => name.startsWith(`${words.join(' ')} `))) words.pop();
  return `agenthub ${words.length ? `${words.join(' ')} ` : ''}--help`;
}

const argv = process.argv.slice(2);
run(argv).catch((err: unknown) => {
  if (err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
    process.stderr.write(`agenthub: ${(err as Error).message}. See ${helpHint(argv)}.\n`);
    process.exit(EXIT.USAGE);
  }
  if (err instanceof AdminError) {
    process.stderr.write(`agenthub: ${err.message}\n`);
    process.exit(EXIT.FAILED);
  }
  throw err;
});
