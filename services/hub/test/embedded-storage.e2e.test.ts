import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '@agenthub/runtime';
import { backends, testLogger } from '@agenthub/testing';
import { startHub, type RunningHub } from '@agenthub/hub';

/**
 * HUB_EMBEDDED_STORAGE=memory (README, Configuration) keeps the embedded databases nowhere but in
 * the process: a second start on the same data directory begins empty, and only the operator
 * token and the generated key-encryption key are written there.
 */
async function files(dir: string): Promise<string[]> {
  return (await readdir(dir, { recursive: true })).map(String);
}

async function rpc(hub: RunningHub, path: string, key: string, method: string, params: unknown) {
  const response = await fetch(`${hub.url}${path}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return (await response.json()) as { result?: any; error?: { code: number } };
}

describe('HUB_EMBEDDED_STORAGE=memory', () => {
  let dataDir: string;

  beforeAll(async () => {
    await backends()[0]!.provision();
    dataDir = await mkdtemp(join(tmpdir(), 'agenthub-storage-'));
  });

  afterAll(async () => {
    await rm(dataDir, { recursive: true, force: true });
  });

  // `disk`, the default, is what every restart suite relies on (messaging-restart.e2e, rate-limits.e2e).
  it('keeps nothing across a restart and writes no database files, only the operator token and the KEK', async () => {
    const start = () => startHub(loadConfig({ HUB_PORT: '0', HUB_DATA_DIR: dataDir, HUB_METRICS: 'false', HUB_EMBEDDED_STORAGE: 'memory' }), testLogger());
    const first = await start();
    let created: { api_key: string };
    try {
      created = (await rpc(first, '/admin', first.adminToken, 'agents.create', { tenant_id: 't', name: 'a', create_tenant: true })).result;
      expect((await rpc(first, '/a2a', created.api_key, 'x-hub/workspace.list', {})).result).toMatchObject({ workspaces: [] });
    } finally {
      await first.stop();
    }
    expect((await files(dataDir)).sort()).toEqual(['admin-token', 'secrets-kek']);

    const second = await start();
    try {
      expect((await rpc(second, '/a2a', created.api_key, 'x-hub/workspace.list', {})).error).toMatchObject({ code: -32000 });
    } finally {
      await second.stop();
    }
  });
});
