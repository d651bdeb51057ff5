import { AUTH_LOCAL_LEASE_MS, AUTH_REVOKED_CHANNEL, type Kv } from '@agenthub/runtime';
import { backends, TestStackBackends, testLogger } from '@agenthub/testing';
import type { AgentPrincipal } from '../src/auth.js';
import { AuthMemory } from '../src/auth-memory.js';

/**
 * Gateways keep API key lookups in memory; a revocation (published by identity, which then waits
 * one lease before answering) must drop them in every gateway, and a gateway that cannot hear
 * revocations must stop trusting its memory.
 */

const alice: AgentPrincipal = { kind: 'agent', agentId: 'agt_alice', tenantId: 'acme' };
const lease = () => new Promise((resolve) => setTimeout(resolve, AUTH_LOCAL_LEASE_MS + 50));
/** What identity's revokeApiKey does after writing the tombstone. */
const revoke = async (kv: Kv, keyHash: string) => {
  await kv.publish(AUTH_REVOKED_CHANNEL, keyHash);
  await lease();
};

async function live(memory: AuthMemory) {
  // A ping has to come back before the memory is trusted; it does within a few ms.
  for (let i = 0; i < 200; i += 1) {
    memory.fill('probe', alice, memory.snapshot());
    if (memory.get('probe')) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error('the memory never became live');
}

describe.each(backends().map((b) => [b.name, b] as const))('gateway auth memory (%s)', (_name, backend) => {
  let stack: TestStackBackends;
  let kvA: Kv;
  let kvB: Kv;
  const started: AuthMemory[] = [];
  const start = async (kv: Kv) => {
    const memory = new AuthMemory(kv, 60_000);
    started.push(memory);
    await memory.start();
    await live(memory);
    return memory;
  };

  beforeAll(async () => {
    stack = await TestStackBackends.open(backend, testLogger());
    kvA = (await stack.deps('gateway')).kv;
    // Two gateway replicas: their own Redis connections on the real backend, one in-process Kv otherwise.
    kvB = stack.provisioned.redisUrl ? (await stack.deps('gateway')).kv : kvA;
  });
  afterAll(async () => {
    await Promise.all(started.map((m) => m.stop()));
    await stack?.close();
  });

  it('drops a revoked key in every gateway before the revocation answers', async () => {
    const [a, b] = [await start(kvA), await start(kvB)];
    a.fill('hash1', alice, a.snapshot());
    b.fill('hash1', alice, b.snapshot());
    b.fill('hash2', alice, b.snapshot());
    expect([a.get('hash1'), b.get('hash1')]).toEqual([alice, alice]);
    await revoke(kvB, 'hash1');
    expect([a.get('hash1'), b.get('hash1'), b.get('hash2')]).toEqual([undefined, undefined, alice]);
  });

  it('does not remember a lookup that a revocation overtook', async () => {
    const a = await start(kvA);
    const epoch = a.snapshot(); // the lookup starts (say, a Kv GET that still saw the key valid)
    await revoke(kvA, 'hash3'); // identity revokes meanwhile
    a.fill('hash3', alice, epoch); // the lookup ends
    expect(a.get('hash3')).toBeUndefined();
  });

  it('forgets everything when its subscription reports a gap, even though its pings come back after it', async () => {
    // A Kv whose subscription reports an outage on demand (named fake: a short Redis outage
    // cannot be caused on demand without disturbing other users of the server).
    let reportGap: (() => void) | undefined;
    const gappy: Kv = Object.create(kvA, {
      subscribe: {
        value: (channel: string, onMessage: (m: string) => void, onGap?: () => void) => {
          reportGap = onGap;
          return kvA.subscribe(channel, onMessage, onGap);
        },
      },
    });
    const a = await start(gappy);
    const epoch = a.snapshot();
    a.fill('hash5', alice, a.snapshot());
    expect(a.get('hash5')).toEqual(alice);
    reportGap!(); // a revocation of hash5 may have been published during the outage
    a.fill('hash6', alice, epoch); // a lookup that started before the gap
    expect([a.get('hash5'), a.get('hash6')]).toEqual([undefined, undefined]);
  });

  it('stops trusting its memory once it no longer hears its own pings', async () => {
    // A Kv whose pub/sub is cut (named fake: a broken subscription cannot be caused on demand).
    let cut = false;
    const flaky: Kv = Object.create(kvA, {
      publish: { value: (channel: string, message: string) => (cut ? Promise.resolve() : kvA.publish(channel, message)) },
    });
    const a = await start(flaky);
    a.fill('hash4', alice, a.snapshot());
    expect(a.get('hash4')).toEqual(alice);
    cut = true;
    await lease();
    expect(a.get('hash4')).toBeUndefined();
  });
});
