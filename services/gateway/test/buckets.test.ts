import type { identityv1 } from '@agenthub/proto';
import { Metrics, openKv, type ClientOf, type Kv } from '@agenthub/runtime';
import { backends, testLogger, type ProvisionedBackend } from '@agenthub/testing';
import { Buckets, type Admission, type Refusal, type TenantLimits } from '../src/limits/buckets.js';

/**
 * A key or tenant bucket found empty is refused locally until it holds a token again, so that a
 * noisy caller's refusals cost the shared Kv (Redis) nothing, and nothing Redis would admit is
 * refused.
 */

const limits = (perSec: number, burst: number): TenantLimits => ({ key: { perSec, burst }, tenant: { perSec: 0, burst: 1 }, maxWaitingPerAgent: 1 });
const refused = (outcome: Refusal | Admission): outcome is Refusal => 'scope' in outcome;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.each(backends().map((b) => [b.name, b] as const))('rate-limit buckets (%s)', (_name, backend) => {
  let provisioned: ProvisionedBackend;
  let kv: Kv;
  let takes = 0;
  /** The shared Kv as the gateway replicas see it, counting the token draws that reach it. */
  let counted: Kv;
  // request() draws tokens only; it never asks identity for a tenant's overrides.
  const identity = {} as ClientOf<typeof identityv1.IdentityService>;
  const replica = () => new Buckets(counted, identity, { quotas: {} as never, defaults: limits(0, 1), address: { perSec: 0, burst: 1 } }, new Metrics(), testLogger());

  beforeAll(async () => {
    provisioned = await backend.provision();
    kv = await openKv({ url: provisioned.redisUrl, prefix: `${provisioned.redisPrefix}buckets:` });
    counted = new Proxy(kv, {
      get(target, property) {
        if (property === 'take') return (...args: Parameters<Kv['take']>) => ((takes += 1), target.take(...args));
        const value: unknown = Reflect.get(target, property);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
  });
  afterAll(async () => {
    await kv?.close();
    await provisioned?.dispose();
  });

  it('refuses an empty bucket without a Kv call until it has refilled one token, then admits again', async () => {
    const a = replica();
    // One token a second: the refusal must still hold when the other replica asks below. At 10 a
    // second it held for 100 ms less the time the first calls took, which a loaded CI run spent.
    const rate = limits(1, 2);
    expect(refused(await a.request('acme', 'key-1', 1, rate))).toBe(false);
    expect(refused(await a.request('acme', 'key-1', 1, rate))).toBe(false);
    const first = await a.request('acme', 'key-1', 1, rate);
    if (!refused(first)) throw new Error('the third call within a burst of 2 was admitted');
    expect(first.retryAfterMs).toBeGreaterThan(0);
    expect(first.retryAfterMs).toBeLessThanOrEqual(1_000);
    const drawn = takes;

    const later = await a.request('acme', 'key-1', 1, rate);
    if (!refused(later)) throw new Error('a call into the empty bucket was admitted');
    expect(later.scope).toBe('key');
    expect(later.retryAfterMs).toBeLessThanOrEqual(first.retryAfterMs);
    // A batch of three waits for two more tokens at one a second.
    const batch = await a.request('acme', 'key-1', 3, rate);
    if (!refused(batch)) throw new Error('a batch into the empty bucket was admitted');
    expect(batch.retryAfterMs).toBeGreaterThanOrEqual(1_000);
    expect(takes).toBe(drawn);

    // Another replica has not seen the bucket empty: its call reaches the Kv, which refuses it too.
    expect(refused(await replica().request('acme', 'key-1', 1, rate))).toBe(true);
    expect(takes).toBe(drawn + 1);

    await sleep(first.retryAfterMs + 5);
    expect(refused(await a.request('acme', 'key-1', 1, rate))).toBe(false);
    expect(takes).toBe(drawn + 2);
  });

  it('asks the Kv again when the bucket\'s rate changed (the operator set new limits)', async () => {
    const a = replica();
    await a.request('initech', 'key-4', 1, limits(1, 1));
    expect(refused(await a.request('initech', 'key-4', 1, limits(1, 1)))).toBe(true);
    const drawn = takes;
    // 10 ms at 1000 a second refill the bucket whatever the Kv's clock.
    await sleep(10);
    expect(refused(await a.request('initech', 'key-4', 1, limits(1000, 5)))).toBe(false);
    expect(takes).toBe(drawn + 1);
  });

  it('checks every bucket it knows to be empty before drawing from any', async () => {
    const a = replica();
    const rate: TenantLimits = { key: { perSec: 100, burst: 100 }, tenant: { perSec: 1, burst: 1 }, maxWaitingPerAgent: 1 };
    expect(refused(await a.request('globex', 'key-2', 1, rate))).toBe(false);
    const tenantEmpty = await a.request('globex', 'key-3', 1, rate);
    if (!refused(tenantEmpty)) throw new Error('the tenant bucket of 1 admitted a second call');
    expect(tenantEmpty.scope).toBe('tenant');
    const drawn = takes;
    // The key bucket has tokens, but the tenant's is known empty: nothing is drawn from either.
    const again = await a.request('globex', 'key-3', 1, rate);
    expect(refused(again) && again.scope).toBe('tenant');
    expect(takes).toBe(drawn);
  });
});
