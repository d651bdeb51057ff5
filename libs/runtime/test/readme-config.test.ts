import { readFileSync } from 'node:fs';
import { loadConfig } from '@agenthub/runtime';

// The README's configuration table is the contract: every default it states is compared with what
// loadConfig gives an empty environment. Expected values come from the README text, never from code.
const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');

function configTable(): Map<string, string> {
  const lines = readme.split('\n');
  const start = lines.findIndex((l) => l.startsWith('| Variable | Default |'));
  expect(start).toBeGreaterThan(0);
  const rows = new Map<string, string>();
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith('|')) break;
    const [first = '', dflt = ''] = line.split('|').slice(1).map((c) => c.trim());
    for (const [, name] of first.matchAll(/`([A-Z][A-Z0-9_]+)`/g)) rows.set(name!, dflt);
  }
  return rows;
}

// Defaults that are not one literal: what the README says, and what the parsed config holds for it.
// Resolved later by their service (a generated token or key, a value derived from another variable).
const DERIVED: Record<string, { readme: RegExp; config: undefined }> = {
  HUB_ADMIN_TOKEN: { readme: /^generated$/, config: undefined },
  HUB_KEKS: { readme: /^generated$/, config: undefined },
  HUB_INTERNAL_KEY: { readme: /random per process/, config: undefined },
  OPS_HOST: { readme: /^`GRPC_HOST`$/, config: undefined },
  EMBEDDINGS_THREADS: { readme: /^one per core, ≤ 2$/, config: undefined },
  // The events service owns the schedule; services/events/test checks its literal default.
  WEBHOOK_RETRY_SCHEDULE_MS: { readme: /^0, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h$/, config: undefined },
  // Each process names itself when it starts tracing; tracing.test checks that the variable wins.
  OTEL_SERVICE_NAME: { readme: /^`agenthub-<service>`$/, config: undefined },
};

describe('README configuration table', () => {
  const table = configTable();
  const config = loadConfig({}) as Record<string, unknown>;

  it('lists the variables this suite knows (HUB_HOST … HUB_METRICS)', () => {
    expect(table.size).toBeGreaterThanOrEqual(60);
    for (const name of ['HUB_HOST', 'HUB_AUTH_CACHE_MS', 'WEBHOOK_HISTORY_DAYS', 'HUB_METRICS']) expect(table.has(name)).toBe(true);
  });

  it.each([...configTable()])('%s: the default the README states is the default an empty environment gets', (name, stated) => {
    const derived = DERIVED[name];
    if (derived) {
      expect(stated).toMatch(derived.readme);
      expect(config[name]).toBe(derived.config);
    } else if (stated === '—') {
      expect(config[name]).toBeUndefined();
    } else {
      const literal = /^`([^`]+)`$/.exec(stated);
      if (!literal) throw new Error(`README default of ${name} is neither a literal nor "—": ${stated}; describe it in DERIVED`);
      // A variable parsed outside libs/runtime's loadConfig needs its own entry here (its service's env parser).
      expect({ name, parsedByLoadConfig: name in config }).toEqual({ name, parsedByLoadConfig: true });
      expect({ name, default: String(config[name]) }).toEqual({ name, default: literal[1] });
    }
  });

  // These variables' only test is their default in the table test above (.ci/check-claims.mjs looks for the names).
  it('states a default for the variables whose only test is the table test', () => {
    for (const name of [
      'HUB_AUTH_CACHE_MS', 'HUB_GRPC_TIMEOUT_MS', 'MESSAGING_ONLINE_MS', 'MESSAGING_PUSH_TIMEOUT_MS',
      'MESSAGING_PUSH_MAX_RESPONSE_BYTES', 'WEBHOOK_HISTORY_DAYS', 'EMBEDDINGS_TIMEOUT_MS', 'OPS_HOST',
      'KAFKA_CLIENT_ID',
    ]) expect(table.has(name)).toBe(true);
  });
});
