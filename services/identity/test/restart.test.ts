import { readdirSync } from 'node:fs';
import { backends, type Backend } from '@agenthub/testing';
import { asAgent, newAgent, operator, startHarness, unique, type Harness } from './harness.js';

describe.each(backends().map((b) => [b.name, b] as const))('identity restart (%s)', (_name, backend: Backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(async () => {
    await h?.close();
  });

  it('re-runs migrations without error and keeps every record', async () => {
    const alice = await newAgent(h, unique('alpha'));
    const bob = await newAgent(h, unique('beta'));
    const { grant } = await h.client.requestGrant({ agentId: bob.id }, asAgent(alice));
    await h.client.approveGrant({ grantId: grant!.id }, asAgent(bob));

    await h.restart();

    const { rows } = await h.db.query<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version');
    // Each migration file applied exactly once, however many restarts.
    const files = readdirSync(new URL('../migrations/', import.meta.url)).filter((f) => f.endsWith('.sql'));
    expect(rows.map((r) => r.version)).toEqual(files.map((f) => Number.parseInt(f, 10)).sort((a, b) => a - b));
    expect((await h.client.authenticate({ apiKey: alice.apiKey })).principal).toMatchObject({ agentId: alice.id, tenantId: alice.tenantId });
    expect((await h.client.listTenants({}, operator)).tenants.map((t) => t.id)).toEqual(expect.arrayContaining([alice.tenantId, bob.tenantId]));
    expect((await h.client.getAgent({ agentId: bob.id }, operator)).agent!.tenantId).toBe(bob.tenantId);
    expect(await h.client.checkGrant({ agentId: alice.id, otherAgentId: bob.id }, operator)).toMatchObject({ approved: true, grantId: grant!.id });
  });
});
