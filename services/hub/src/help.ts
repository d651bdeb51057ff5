/** What `agenthub --help` and `agenthub <command> --help` print. */

interface CommandHelp {
  usage: string;
  summary: string;
  /** More lines for the command's own help. */
  details?: string;
}

export const COMMAND_HELP: Record<string, CommandHelp> = {
  serve: {
    usage: 'agenthub serve [all|gateway|identity|workspace|secrets|messaging|events]',
    summary: 'run the whole hub (default: every service in one process, the gateway in a second one where HUB_PROCESSES says), or one service (split mode)',
    details: `Configuration comes from the environment (the README's table); LOG_FORMAT=pretty|json.
Exit codes: 0 stopped by SIGTERM/SIGINT, 1 failed to start, unclean stop or the gateway process died,
2 invalid configuration (the message names the variable), 3 a port is taken or an address
cannot be bound (the message names the variable).`,
  },
  'tenants create': { usage: 'agenthub tenants create <tenant-id> [--name <name>]', summary: 'create a tenant (1–63 lowercase letters, digits, hyphens)' },
  'tenants list': { usage: 'agenthub tenants list', summary: 'list tenants' },
  'tenants usage': { usage: 'agenthub tenants usage <tenant-id>', summary: "a tenant's use of every quota (agents, workspaces, members, memories, secrets, webhooks, tasks, queued deliveries)" },
  'tenants limits': {
    usage: `agenthub tenants limits <tenant-id> [--key <per-sec>/<burst>] [--tenant-rate <per-sec>/<burst>]
                        [--max-waiting <n>] [--quota <name>=<n>]... [--reset]`,
    summary: "show a tenant's rate limits and quotas, or override some",
    details: `Without options it shows the limits in force, marking overrides. --key, --tenant-rate,
--max-waiting and --quota (agents_per_tenant, members_per_workspace, queued_deliveries_per_agent)
override those limits (the others keep theirs); --reset first drops every override, so alone it
goes back to the hub's defaults.`,
  },
  'agents create': {
    usage: `agenthub agents create --tenant <tenant-id> --name <name> [--id <agent-id>] [--endpoint <url>]
                       [--output-modes <mime,mime>] [--description <text>] [--skill <id>:<name>[:<description>]]...`,
    summary: 'register an agent (creating the tenant when missing) and print its first API key',
    details: `--endpoint makes it a push agent (its A2A 1.0 JSON-RPC URL); --description and --skill are what
its Agent Card advertises. The API key is shown once: the hub keeps only its hash.`,
  },
  'agents list': { usage: 'agenthub agents list [--tenant <tenant-id>]', summary: 'list agents' },
  'agents get': { usage: 'agenthub agents get <agent-id>', summary: 'show one agent' },
  'agents rotate-push-secret': {
    usage: 'agenthub agents rotate-push-secret <agent-id>',
    summary: "issue a push agent's new push secret (the old one stops at once)",
  },
  'keys create': { usage: 'agenthub keys create --agent <agent-id>', summary: 'issue another API key (for rotation)' },
  'keys list': { usage: 'agenthub keys list --agent <agent-id>', summary: "list an agent's keys (prefixes only)" },
  'keys revoke': { usage: 'agenthub keys revoke <key-id>', summary: 'revoke a key; effective on the next call' },
  'secrets rotate-kek': {
    usage: 'agenthub secrets rotate-kek',
    summary: 'rewrap every workspace data key under the newest KEK',
    details: `Add the new version to HUB_KEKS on every replica first. Values are untouched. Shows that it
is working on stderr. Exits 1 if a data key could not be unwrapped (see the secrets service's log).`,
  },
  'secrets rotate-key': { usage: 'agenthub secrets rotate-key --workspace <ws-id>', summary: "re-seal one workspace's secrets under a new data key" },
  'memories reembed': {
    usage: 'agenthub memories reembed --workspace <ws-id> [--model <model-id>]',
    summary: "embed a workspace's memories with the configured model",
    details: `Progress goes to stderr after each batch. --model refuses to run unless it is the configured
model. Exits 1 if memories remain (no progress was made; run again).`,
  },
};

const OPTIONS = `Options of every administration command:
  --json            print the result as JSON
  --url <url>       the hub (default HUB_URL, else http://127.0.0.1:<HUB_PORT|8080>)
  --token-file <path>  the operator token from a file (- reads standard input); default
                    HUB_ADMIN_TOKEN, else <HUB_DATA_DIR>/admin-token
  -h, --help        help for the command

Exit codes: 0 done, 1 the hub refused or failed the command (or left work undone), 2 bad usage.`;

/** Help for everything, or for the commands of one group (`agents`), or for one command. */
export function helpText(version: string, group?: string, action?: string): string {
  const exact = group && COMMAND_HELP[action ? `${group} ${action}` : group];
  if (exact) {
    const own = exact.details ? `\n\n${exact.details}` : '';
    return `${exact.usage}\n\n${capitalise(exact.summary)}.${own}${group === 'serve' ? '' : `\n\n${OPTIONS}`}`;
  }
  const names = Object.keys(COMMAND_HELP).filter((name) => !group || name.split(' ')[0] === group);
  if (group && names.length) return `${list(names)}\n\n${OPTIONS}`;
  return `agenthub ${version} — run and administer an AgentHub

Usage: agenthub <command> [options]    (agenthub <command> --help for one command)

${list(Object.keys(COMMAND_HELP))}

  agenthub --version   print the version

${OPTIONS}`;
}

/** One line per command, `usage  summary`; a usage too long for the column puts the summary below. */
function list(names: string[]): string {
  const WIDTH = 48;
  return names
    .map((name) => {
      const { usage, summary } = COMMAND_HELP[name]!;
      const short = usage.split(/ \[--|\n/)[0]!;
      return short.length < WIDTH ? `  ${short.padEnd(WIDTH)} ${summary}` : `  ${short}\n  ${''.padEnd(WIDTH)} ${summary}`;
    })
    .join('\n');
}

function capitalise(text: string): string {
  return `${text.charAt(0).toUpperCase()}${text.slice(1)}`;
}
