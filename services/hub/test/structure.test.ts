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
      expect(readFileSync(join(ROOT, 'services', 'hub', 'src', 'index.ts'), 'utf8')).toContain(options);
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
});
