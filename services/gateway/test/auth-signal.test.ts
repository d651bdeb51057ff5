import { request } from 'node:http';
import { abortError, authCacheKey, InternalKey, MemoryKv, Metrics } from '@agenthub/runtime';
import { testLogger } from '@agenthub/testing';
import { startGateway, UPSTREAMS, type UpstreamAddresses } from '../src/index.js';

/**
 * Issue 17: the request's signal exists before authentication, so an API-key lookup stops when
 * the client hangs up instead of running on for nobody. The lookup here is the shared auth cache
 * (Kv), held open until its signal aborts; no upstream is called.
 */

const nowhere = Object.fromEntries(Object.keys(UPSTREAMS).map((name) => [name, '127.0.0.1:1'])) as UpstreamAddresses;

describe('gateway authentication', () => {
  it('looks the API key up under the request\'s signal, which aborts when the client hangs up', async () => {
    const kv = new MemoryKv();
    const lookups: (AbortSignal | undefined)[] = [];
    let looking = () => undefined as void;
    const looked = new Promise<void>((resolve) => (looking = resolve));
    const get = kv.get.bind(kv);
    kv.get = (key, signal) => {
      if (!key.startsWith(authCacheKey(''))) return get(key, signal);
      lookups.push(signal);
      looking();
      // A cache that does not answer: only the signal ends the wait.
      return new Promise((_, reject) => signal?.addEventListener('abort', () => reject(abortError(signal)), { once: true }));
    };
    const gateway = await startGateway({
      log: testLogger(),
      metrics: new Metrics({ defaultMetrics: false }),
      kv,
      upstreams: nowhere,
      adminToken: 'operator-token-0123456789',
      host: '127.0.0.1',
      port: 0,
      maxBodyBytes: 1024 * 1024,
      maxBatch: 10,
      authCacheMs: 60_000,
      grpcTimeoutMs: 1_000,
      internalKey: InternalKey.generate(),
    });
    try {
      const call = request(`${gateway.url}/a2a`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ahk_${'a'.repeat(43)}` },
      });
      call.on('error', () => undefined);
      call.end(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'x-hub/workspace.list', params: {} }));
      await looked;
      expect(lookups[0]?.aborted).toBe(false);
      call.destroy();
      const until = Date.now() + 2_000;
      while (!lookups[0]?.aborted && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 10));
      expect(lookups[0]?.aborted).toBe(true);
    } finally {
      await gateway.stop(0);
    }
  });
});
