import { backends } from '@agenthub/testing';
import { startTestHub, type TestHub } from './harness.js';
import { splitMode, type SplitStack } from './split-hub.js';

/**
 * README: `HUB_AUTH_CACHE_MS` is how long the gateway caches an API key's owner, 0 disables it, and
 * `keys revoke` is "effective on the next call". With the cache off every call asks identity, so a
 * revoked key is refused at once and a new key works at once.
 */
describe.each(backends().map((b) => [b.name, b] as const))('API key revocation with HUB_AUTH_CACHE_MS=0 (%s)', (_name, backend) => {
  let hub: TestHub;

  beforeAll(async () => {
    hub = await startTestHub(backend, { HUB_AUTH_CACHE_MS: '0' });
  });
  afterAll(() => hub?.stop());

  it('refuses a revoked key on the next call and accepts the agent’s other key', async () => {
    const carol = await hub.agent('acme', 'carol');
    const second = await hub.admin('keys.create', { agent_id: carol.agent_id });
    for (let i = 0; i < 3; i++) expect((await hub.call(carol.api_key, 'x-hub/workspace.list')).status).toBe(200);
    await hub.admin('keys.revoke', { key_id: carol.key_id });
    const refused = await hub.call(carol.api_key, 'x-hub/workspace.list');
    expect(refused.status).toBe(401);
    expect(refused.body.error).toEqual({ code: -32000, message: 'Unauthorized: Missing or invalid API key' });
    const accepted = await hub.call(second.api_key, 'x-hub/workspace.list');
    expect(accepted.status).toBe(200);
    expect(accepted.body.result.count).toBe(0);
  });
});

/**
 * Two gateway replicas, each caching key owners (the default HUB_AUTH_CACHE_MS, 30 s): a key
 * revoked through one is refused by the other on its next call, as the README promises.
 */
const real = backends().find((b) => b.name === 'postgres+redis');
(real ? describe : describe.skip)('API key revocation across two gateway replicas (split)', () => {
  let hub: TestHub & SplitStack;
  let second: string;

  beforeAll(async () => {
    hub = await startTestHub(splitMode(real!));
    second = (await hub.addGateway()).url;
  }, 240_000);
  afterAll(() => hub?.stop(), 120_000);

  const callOn = async (url: string, key: string) => {
    const response = await fetch(`${url}/a2a`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'x-hub/workspace.list', params: {} }),
    });
    return { status: response.status, body: (await response.json()) as { error?: { code: number; message: string } } };
  };

  it('a key revoked through one gateway is refused by the other on its next call', async () => {
    const dave = await hub.agent('acme', 'dave');
    const spare = await hub.admin('keys.create', { agent_id: dave.agent_id });
    // Both replicas have now seen (and cached) the key.
    for (const url of [hub.url, second, hub.url, second]) expect((await callOn(url, dave.api_key)).status).toBe(200);
    await hub.admin('keys.revoke', { key_id: dave.key_id });
    for (const url of [second, hub.url]) {
      const refused = await callOn(url, dave.api_key);
      expect([url, refused.status, refused.body.error]).toEqual([url, 401, { code: -32000, message: 'Unauthorized: Missing or invalid API key' }]);
    }
    for (const url of [second, hub.url]) expect((await callOn(url, spare.api_key)).status).toBe(200);
  }, 60_000);
});
