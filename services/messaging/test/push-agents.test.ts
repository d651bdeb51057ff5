import { migrate, newId, openDb, type Db } from '@agenthub/runtime';
import { backends, testLogger } from '@agenthub/testing';
import { PushStore } from '../src/push-store.js';

/**
 * Every send to a push agent records the agent's endpoint and tenant for the push worker. A
 * replica that recorded them lately skips the statement, for as long as its recipient cache
 * keeps an agent's record; a changed endpoint is recorded at once.
 */
describe.each(backends().map((b) => [b.name, b] as const))('recording push agents (%s)', (_name, backend) => {
  const signal = new AbortController().signal;
  let db: Db;
  let dispose: () => Promise<void>;
  /** Statements the stores under test ran. */
  let statements = 0;
  const counted = () => new Proxy(db, {
    get(target, key, receiver) {
      if (key === 'query') return (...args: Parameters<Db['query']>) => ((statements += 1), target.query(...args));
      const value = Reflect.get(target, key, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  const row = async (agentId: string) =>
    (await db.query<{ endpoint_url: string; tenant_id: string }>('SELECT endpoint_url, tenant_id FROM push_agents WHERE agent_id = $1', [agentId])).rows[0];

  beforeAll(async () => {
    const provisioned = await backend.provision();
    dispose = provisioned.dispose;
    db = await openDb({ url: provisioned.databaseUrl, schema: 'messaging' });
    await migrate(db, { schema: 'messaging', dir: new URL('../migrations/', import.meta.url), log: testLogger() });
  });
  afterAll(async () => {
    await db?.close();
    await dispose?.();
  });
  beforeEach(() => {
    statements = 0;
  });

  it('runs one statement for many sends to the same agent, and one more when its endpoint changes', async () => {
    const store = new PushStore(counted());
    const agentId = newId('agent');
    for (let n = 0; n < 5; n += 1) await store.recordPushAgent(signal, agentId, 'https://agent.example/a2a', 'tenant-a');
    expect(statements).toBe(1);
    expect(await row(agentId)).toEqual({ endpoint_url: 'https://agent.example/a2a', tenant_id: 'tenant-a' });

    await store.recordPushAgent(signal, agentId, 'https://moved.example/a2a', 'tenant-a');
    await store.recordPushAgent(signal, agentId, 'https://moved.example/a2a', 'tenant-a');
    expect(statements).toBe(2);
    expect(await row(agentId)).toEqual({ endpoint_url: 'https://moved.example/a2a', tenant_id: 'tenant-a' });
  });

  it('records the same values again once its memory is as old as a recipient record, over what another replica wrote', async () => {
    const here = new PushStore(counted(), 300);
    const otherReplica = new PushStore(db, 300);
    const agentId = newId('agent');
    await here.recordPushAgent(signal, agentId, 'https://a.example/a2a', 'tenant-a');
    // Another replica, whose recipient cache holds a later endpoint, records it.
    await otherReplica.recordPushAgent(signal, agentId, 'https://b.example/a2a', 'tenant-a');
    // The endpoint changed back: within its memory this replica writes nothing...
    await here.recordPushAgent(signal, agentId, 'https://a.example/a2a', 'tenant-a');
    expect(statements).toBe(1);
    expect((await row(agentId))!.endpoint_url).toBe('https://b.example/a2a');
    // ...and after it, records what it knows.
    await new Promise((resolve) => setTimeout(resolve, 350));
    await here.recordPushAgent(signal, agentId, 'https://a.example/a2a', 'tenant-a');
    expect(statements).toBe(2);
    expect((await row(agentId))!.endpoint_url).toBe('https://a.example/a2a');
  });
});
