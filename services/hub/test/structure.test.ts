import { readdirSync, readFileSync, statSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The workspace layout the architecture relies on (docs in DESIGN.md): services talk to each other
 * only over gRPC, so no service imports another service's package or reaches into its folder;
 * libraries never import services; and every package a workspace's sources import is declared in
 * that workspace's own package.json (hoisting in node_modules would otherwise hide a missing one).
 * The all-in-one hub (`services/hub`) is the one place that starts every service, so it may import them;
 * it takes each service's settings from the same `<service>Options(config, …)` as the service's main.ts.
 * Every store method (a public method of a class or object in a `services/<service>/src/*store*.ts`)
 * takes the caller's signal, so no statement outlives the call it serves.
 */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const SERVICES = readdirSync(join(ROOT, 'services')).filter((name) => statSync(join(ROOT, 'services', name)).isDirectory());
const LIBS = readdirSync(join(ROOT, 'libs')).filter((name) => statSync(join(ROOT, 'libs', name, 'package.json'), { throwIfNoEntry: false })?.isFile());
const WORKSPACES = [...SERVICES.map((name) => `services/${name}`), ...LIBS.map((name) => `libs/${name}`)].filter((dir) =>
  statSync(join(ROOT, dir, 'package.json'), { throwIfNoEntry: false })?.isFile(),
);
const BUILTINS = new Set(builtinModules);

interface Import {
  file: string;
  specifier: string;
}

function sourceFiles(dir: string): string[] {
  if (!statSync(dir, { throwIfNoEntry: false })?.isDirectory()) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return /\.(ts|tsx|mts|js|mjs)$/.test(entry.name) && !entry.name.endsWith('.d.ts') ? [path] : [];
  });
}

/** Static imports, re-exports and dynamic `import('...')` with a literal specifier. */
function importsOf(file: string): Import[] {
  const text = readFileSync(file, 'utf8');
  const found: Import[] = [];
  const patterns = [/\b(?:import|export)\s[^'"`;]*?\bfrom\s*['"]([^'"]+)['"]/g, /\bimport\s*['"]([^'"]+)['"]/g, /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g];
  for (const pattern of patterns) for (const match of text.matchAll(pattern)) found.push({ file, specifier: match[1]! });
  return found;
}

/** `@scope/name/sub` → `@scope/name`, `name/sub` → `name`. */
function packageName(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
}

function manifest(workspace: string): { name: string; deps: Set<string> } {
  const json = JSON.parse(readFileSync(join(ROOT, workspace, 'package.json'), 'utf8')) as {
    name: string;
    dependencies?: Record<string, string>;
    peerDependencies?: Record<string, string>;
    optionalDependencies?: Record<string, string>;
  };
  return { name: json.name, deps: new Set(Object.keys({ ...json.dependencies, ...json.peerDependencies, ...json.optionalDependencies })) };
}

const serviceNames = new Map(SERVICES.filter((name) => name !== 'hub').map((name) => [manifest(`services/${name}`).name, name]));

function sourcesOf(workspace: string): Import[] {
  return sourceFiles(join(ROOT, workspace, 'src')).flatMap(importsOf);
}

const where = (imp: Import) => `${relative(ROOT, imp.file)}: ${imp.specifier}`;

interface StoreMethod {
  owner: string;
  name: string;
  params: string;
}

/**
 * The public methods of the classes and exported object literals of one store module, with their
 * parameter lists. Members are read at the formatter's two-space indentation of a top-level
 * class or object; private, protected and #-named members and constructors are not store methods.
 */
function storeMethods(text: string): StoreMethod[] {
  const lines = text.split('\n');
  const methods: StoreMethod[] = [];
  let owner: string | undefined;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const opened = /^(?:export )?(?:default )?(?:abstract )?class (\w+)|^export const (\w+)\s*(?::[^=]+)?=\s*\{\s*$/.exec(line);
    if (opened) {
      owner = opened[1] ?? opened[2];
      continue;
    }
    if (line.startsWith('}')) owner = undefined;
    const member = owner && /^ {2}((?:(?:public|private|protected|static|readonly|override|async)\s+)*)(#?\w+)\s*(?:<[^(]*>)?\(/.exec(line);
    if (!member || member[2] === 'constructor' || member[2]!.startsWith('#') || /\b(private|protected)\b/.test(member[1]!)) continue;
    // The parameter list, to its closing parenthesis, over as many lines as it takes.
    const rest = lines.slice(i).join('\n');
    const open = rest.indexOf('(');
    let depth = 0;
    let close = open;
    for (; close < rest.length; close++) {
      if ('([{'.includes(rest[close]!)) depth++;
      else if (')]}'.includes(rest[close]!) && --depth === 0) break;
    }
    methods.push({ owner: owner!, name: member[2]!, params: rest.slice(open + 1, close) });
  }
  return methods;
}

const takesSignal = (method: StoreMethod) => /(^|[\s,(])signal\??:\s*AbortSignal\b/.test(method.params);

const STORE_FILES = SERVICES.flatMap((service) =>
  sourceFiles(join(ROOT, 'services', service, 'src')).filter((file) => dirname(file) === join(ROOT, 'services', service, 'src') && /store[^/]*\.ts$/.test(file)),
);

describe('workspace structure', () => {
  it('finds the workspaces and their sources', () => {
    expect(SERVICES).toEqual(expect.arrayContaining(['gateway', 'identity', 'workspace', 'secrets', 'messaging', 'events', 'hub']));
    expect(LIBS).toEqual(expect.arrayContaining(['proto', 'runtime', 'testing']));
    expect(sourcesOf('services/messaging').length).toBeGreaterThan(10);
  });

  it.each(SERVICES.filter((name) => name !== 'hub'))('services/%s imports no other service, by package or by path', (service) => {
    const dir = join(ROOT, 'services', service);
    const bad = sourcesOf(`services/${service}`).filter((imp) => {
      if (imp.specifier.startsWith('.')) {
        const target = resolve(dirname(imp.file), imp.specifier);
        return !target.startsWith(dir + sep);
      }
      const owner = serviceNames.get(packageName(imp.specifier));
      return owner !== undefined && owner !== service;
    });
    expect(bad.map(where)).toEqual([]);
  });

  it.each(LIBS)('libs/%s imports no service, by package or by path', (lib) => {
    const dir = join(ROOT, 'libs', lib);
    const bad = sourcesOf(`libs/${lib}`).filter((imp) => {
      if (imp.specifier.startsWith('.')) return !resolve(dirname(imp.file), imp.specifier).startsWith(dir + sep);
      return packageName(imp.specifier) === '@agenthub/hub' || serviceNames.has(packageName(imp.specifier));
    });
    expect(bad.map(where)).toEqual([]);
  });

  it.each(['gateway', 'identity', 'workspace', 'secrets', 'messaging', 'events'])(
    '%s is wired once: its main.ts and serve all both take its settings from its <service>Options',
    (service) => {
      const options = `${service}Options(config`;
      expect(readFileSync(join(ROOT, 'services', service, 'src', 'main.ts'), 'utf8')).toContain(options);
      // serve all wires the services in services.ts and the gateway in index.ts (one process) and
      // gateway-process.ts (its own process).
      const wiring = service === 'gateway' ? ['index.ts', 'gateway-process.ts'] : ['services.ts'];
      for (const file of wiring) expect(readFileSync(join(ROOT, 'services', 'hub', 'src', file), 'utf8')).toContain(options);
    },
  );

  it.each(WORKSPACES)('every package %s imports is declared in its package.json', (workspace) => {
    const { name, deps } = manifest(workspace);
    const bad = sourcesOf(workspace).filter((imp) => {
      if (imp.specifier.startsWith('.') || imp.specifier.startsWith('node:') || BUILTINS.has(imp.specifier)) return false;
      const pkg = packageName(imp.specifier);
      return pkg !== name && !deps.has(pkg);
    });
    expect(bad.map(where)).toEqual([]);
  });

  it('reads store methods and their parameters, and tells one without a signal', () => {
    const methods = storeMethods(
      [
        'export class ThingStore {',
        '  constructor(private readonly db: Db) {}',
        '  async get(signal: AbortSignal, id: string): Promise<Thing> {',
        '    return this.db.query(`SELECT ${COLUMNS}`, [id], signal);',
        '  }',
        '  async list(',
        '    tenantId: string,',
        '    page: { limit: number },',
        '  ): Promise<Thing[]> {',
        '    return [];',
        '  }',
        '  private async row(id: string) {}',
        '}',
        'export const thingSql = {',
        '  async count(q: Queryable, workspaceId: string): Promise<number> {',
        '    return 0;',
        '  },',
        '};',
      ].join('\n'),
    );
    expect(methods.map((m) => [`${m.owner}.${m.name}`, takesSignal(m)])).toEqual([
      ['ThingStore.get', true],
      ['ThingStore.list', false],
      ['thingSql.count', false],
    ]);
  });

  /**
   * Issue 14 item 1: task states, their lifecycle sets and JSON media types live in libs/tasks
   * only. A list of two or more state words in code (an array, a `z.enum`, an SQL `IN`) or a JSON
   * media-type test of its own (`isJsonType`) elsewhere is a copy that can drift. Exceptions, each
   * for its reason: the published client (it depends on none of the hub's packages), and the
   * in-flight count, whose `IN` must read as the partial index of messaging migration 006 (and the
   * function of 008) do, for the planner to use that index.
   */
  it('the task model has one home: no copy of state lists or isJsonType outside libs/tasks', () => {
    const WORD = `['"](?:submitted|working|input-required|completed|failed|canceled|rejected)['"]`;
    const stateList = new RegExp(`${WORD}\\s*,\\s*${WORD}`);
    const jsonTest = /\b(?:function\s+isJsonType|(?:const|let|var)\s+isJsonType)\b|application\\\/[^/\n]*json/;
    const ALLOWED = "services/messaging/src/task-store.ts: WHERE sender_agent_id = ANY($1::text[]) AND state IN ('submitted', 'working') GROUP BY 1`,";
    const found = WORKSPACES.filter((w) => w !== 'libs/tasks' && w !== 'libs/client').flatMap((workspace) =>
      sourceFiles(join(ROOT, workspace, 'src')).flatMap((file) =>
        readFileSync(file, 'utf8')
          .split('\n')
          .filter((line) => stateList.test(line) || jsonTest.test(line))
          .map((line) => `${relative(ROOT, file).split(sep).join('/')}: ${line.trim()}`),
      ),
    );
    expect(found.filter((hit) => hit !== ALLOWED)).toEqual([]);
    // The exception is still where it is said to be (moving it must move it here too).
    expect(found).toContain(ALLOWED);
  });

  it('every store method takes the caller\'s signal', () => {
    const methods = STORE_FILES.flatMap((file) => storeMethods(readFileSync(file, 'utf8')).map((method) => ({ file, method })));
    // The stores of every service with a database are read (a rename must not empty the check).
    for (const service of ['identity', 'workspace', 'secrets', 'messaging', 'events']) {
      expect(methods.filter(({ file }) => file.includes(`${sep}services${sep}${service}${sep}`)).length).toBeGreaterThan(3);
    }
    const bad = methods.filter(({ method }) => !takesSignal(method)).map(({ file, method }) => `${relative(ROOT, file)}: ${method.owner}.${method.name}`);
    expect(bad).toEqual([]);
  });
});
