import { readFile } from 'node:fs/promises';
import { adminMethods, agentMethods, openRpcDocument } from '@agenthub/gateway';

/**
 * docs/openrpc.json is what the gateway accepts: generated from its method tables and params
 * schemas (`npm run openrpc`), so a method or parameter changed without regenerating fails here.
 */
describe('docs/openrpc.json', () => {
  it('matches the gateway\'s method table and params schemas', async () => {
    const checkedIn = JSON.parse(await readFile(new URL('../../../docs/openrpc.json', import.meta.url), 'utf8'));
    expect(checkedIn).toEqual(JSON.parse(JSON.stringify(openRpcDocument())));
    const table = [...agentMethods(new Map()).keys(), ...adminMethods(new Map()).keys()].sort();
    expect(checkedIn.methods.map((m: { name: string }) => m.name).sort()).toEqual(table);
  });

  it('every method is in docs/protocol.md', async () => {
    const protocol = await readFile(new URL('../../../docs/protocol.md', import.meta.url), 'utf8');
    const missing = [...agentMethods(new Map()).keys()].filter((name) => !protocol.includes(`\`${name}\``));
    expect(missing).toEqual([]);
  });
});
