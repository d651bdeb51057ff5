import { backends } from '@agenthub/testing';
import { startTestHub, type TestHub } from './harness.js';

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
