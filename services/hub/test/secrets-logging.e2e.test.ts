import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { createLogger, loadConfig } from '@agenthub/runtime';
import { backends } from '@agenthub/testing';
import { startHub } from '@agenthub/hub';

/**
 * The whole hub with debug logging captured, driven through every secrets path over HTTP
 * (success, bad parameters, refusals, rotation): no value, KEK or data key may appear in what
 * any service or the gateway logged. Embedded mode generates its KEK file; the real backend
 * gets HUB_KEKS.
 */
describe.each(backends().map((b) => [b.name, b] as const))('secrets never logged (%s)', (name, backend) => {
  it('leaves no value and no key material in the debug log', async () => {
    const lines: string[] = [];
    const log = createLogger({
      level: 'debug',
      destination: new Writable({ write(chunk, _e, done) { lines.push(String(chunk)); done(); } }),
    });
    const provisioned = await backend.provision();
    const dataDir = await mkdtemp(join(tmpdir(), 'agenthub-secrets-log-'));
    const kek = randomBytes(32);
    const hub = await startHub(
      loadConfig({
        HUB_PORT: '0',
        HUB_DATA_DIR: dataDir,
        HUB_METRICS: 'false',
        DATABASE_URL: provisioned.databaseUrl,
        REDIS_URL: provisioned.redisUrl,
        REDIS_PREFIX: provisioned.redisPrefix,
        // Embedded: databases in memory (nothing here restarts), the KEK file it generates on disk.
        ...(name === 'embedded' ? { HUB_EMBEDDED_STORAGE: 'memory' } : { HUB_KEKS: `v1:${kek.toString('base64')}` }),
      }),
      log,
    );
    try {
      const kekMaterial = name === 'embedded' ? Buffer.from((await readFile(join(dataDir, 'secrets-kek'), 'utf8')).trim().slice(3), 'base64') : kek;
      let id = 1;
      const rpc = async (key: string, method: string, params: unknown, path = '/a2a') => {
        const response = await fetch(`${hub.url}${path}`, {
          method: 'POST',
          headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
          body: JSON.stringify({ jsonrpc: '2.0', id: id++, method, params }),
        });
        return (await response.json()) as { result?: any; error?: { code: number } };
      };
      const admin = (method: string, params: unknown = {}) => rpc(hub.adminToken, method, params, '/admin');
      const agent = async (tenant: string, agentName: string) =>
        (await admin('agents.create', { tenant_id: tenant, name: agentName, create_tenant: true })).result.api_key as string;
      const owner = await agent('acme', 'owner');
      const stranger = await agent('acme', 'stranger');
      const { result } = await rpc(owner, 'x-hub/workspace.create', { name: 'Logged' });
      const workspaceId = result.workspace.id as string;

      const values = Array.from({ length: 4 }, (_, i) => `logged-value-${i}-${randomBytes(12).toString('hex')}`);
      for (const [i, value] of values.entries()) {
        expect((await rpc(owner, 'x-hub/workspace.secrets.set', { workspace_id: workspaceId, key: `k${i}`, value })).result).toMatchObject({ key: `k${i}`, created: true });
        expect((await rpc(owner, 'x-hub/workspace.secrets.get', { workspace_id: workspaceId, key: `k${i}` })).result.value).toBe(value);
      }
      // Refusals and bad parameters, each carrying a value.
      expect((await rpc(stranger, 'x-hub/workspace.secrets.set', { workspace_id: workspaceId, key: 'k0', value: values[0] })).error?.code).toBe(-32100);
      expect((await rpc(owner, 'x-hub/workspace.secrets.set', { workspace_id: workspaceId, key: 'bad key', value: values[1] })).error?.code).toBe(-32602);
      expect((await rpc(owner, 'x-hub/workspace.secrets.set', { workspace_id: workspaceId, key: 'big', value: values[2]!.padEnd(70_000, '!') })).error?.code).toBe(-32602);
      expect((await rpc(owner, 'x-hub/workspace.secrets.set', { workspace_id: 'ws_unknown', key: 'k', value: values[3] })).error?.code).toBe(-32101);
      expect((await rpc(owner, 'x-hub/workspace.secrets.nope', { workspace_id: workspaceId, key: 'k', value: values[3] })).error?.code).toBe(-32601);
      expect((await admin('secrets.rotate_kek')).result).toMatchObject({ failed: 0 });
      expect((await admin('secrets.rotate_workspace_key', { workspace_id: workspaceId })).result.resealed).toBe(4);
      expect((await rpc(owner, 'x-hub/workspace.secrets.list', { workspace_id: workspaceId })).result.count).toBe(4);
      expect((await rpc(owner, 'x-hub/workspace.secrets.delete', { workspace_id: workspaceId, key: 'k3' })).result.deleted).toBe(true);
      expect((await rpc(owner, 'x-hub/workspace.delete', { workspace_id: workspaceId })).result).toEqual({ deleted: true, workspace_id: workspaceId });
      expect((await rpc(owner, 'x-hub/workspace.secrets.get', { workspace_id: workspaceId, key: 'k0' })).error?.code).toBe(-32101);

      const output = lines.join('');
      expect(output).toContain('"level":20');
      expect(output).toContain('destroyed the data key of a deleted workspace');
      for (const value of values) expect(output).not.toContain(value);
      for (const encoding of ['base64', 'base64url', 'hex'] as const) expect(output).not.toContain(kekMaterial.toString(encoding));
    } finally {
      await hub.stop();
      await provisioned.dispose();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
