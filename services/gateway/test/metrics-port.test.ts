import { InternalKey, loadConfig, MemoryKv, Metrics } from '@agenthub/runtime';
import { freePort, testLogger } from '@agenthub/testing';
import { createGateway, gatewayOptions, startGateway, UPSTREAMS, type GatewayDeps, type RunningGateway, type UpstreamAddresses } from '../src/index.js';
import { isLoopbackHost } from '../src/options.js';
import { InMemoryHttp } from './in-memory-http.js';

/**
 * Issue 12, item 9: in split mode the gateway's `/metrics` is on its ops port, which the chart's
 * Ingress never routes to, and no longer on the public port. No upstream is needed for this: the
 * addresses are never called. Which port serves what needs real ports; the all-in-one mode, with
 * one, is asked through the app alone. The all-in-one hub (`serve all`, gatewayOptions with
 * oneProcess) moves it to the ops port too as soon as HUB_HOST is not loopback (the container's
 * 0.0.0.0), where tenant ids in its labels would otherwise be public.
 */

const nowhere = Object.fromEntries(Object.keys(UPSTREAMS).map((name) => [name, '127.0.0.1:1'])) as UpstreamAddresses;

const settings = (): Omit<GatewayDeps, 'host' | 'port'> => ({
  log: testLogger(),
  metrics: new Metrics({ defaultMetrics: false }),
  kv: new MemoryKv(),
  upstreams: nowhere,
  adminToken: 'operator-token-0123456789',
  maxBodyBytes: 1024 * 1024,
  maxBatch: 10,
  authCacheMs: 0,
  grpcTimeoutMs: 1_000,
  internalKey: InternalKey.generate(),
});

async function start(metricsListen: { host: string; port: number }): Promise<RunningGateway> {
  return startGateway({ ...settings(), host: '127.0.0.1', port: 0, metricsListen });
}

describe('gateway /metrics', () => {
  it('with a metrics port: serves /metrics there only, and 404 on the public port', async () => {
    const gateway = await start({ host: '127.0.0.1', port: 0 });
    try {
      expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200);
      expect((await fetch(`${gateway.url}/metrics`)).status).toBe(404);
      const metrics = await fetch(`${gateway.metricsUrl}/metrics`);
      expect(metrics.status).toBe(200);
      expect(await metrics.text()).toContain('# TYPE agenthub_http_requests_total counter');
      expect((await fetch(`${gateway.metricsUrl}/a2a`, { method: 'POST' })).status).toBe(404);
    } finally {
      await gateway.stop(100);
    }
  });

  it('without one (the all-in-one mode): serves /metrics on the public port', async () => {
    const gateway = await createGateway(settings());
    try {
      expect((await new InMemoryHttp(gateway.app.callback()).request('/metrics')).status).toBe(200);
    } finally {
      await gateway.close();
    }
  });

  it('all-in-one with HUB_HOST=0.0.0.0: serves /metrics on OPS_PORT only, 404 on HUB_PORT', async () => {
    const opsPort = await freePort();
    const config = loadConfig({ HUB_HOST: '0.0.0.0', HUB_PORT: '0', OPS_PORT: String(opsPort) });
    const gateway = await startGateway({ ...settings(), ...gatewayOptions(config, { oneProcess: true }) });
    try {
      expect((await fetch(`http://127.0.0.1:${gateway.port}/healthz`)).status).toBe(200);
      expect((await fetch(`http://127.0.0.1:${gateway.port}/metrics`)).status).toBe(404);
      const metrics = await fetch(`http://127.0.0.1:${opsPort}/metrics`);
      expect(metrics.status).toBe(200);
      expect(await metrics.text()).toContain('# TYPE agenthub_http_requests_total counter');
    } finally {
      await gateway.stop(100);
    }
  });

  it('all-in-one with a loopback HUB_HOST (the default): keeps /metrics on HUB_PORT', async () => {
    expect(gatewayOptions(loadConfig({}), { oneProcess: true }).metricsListen).toBeUndefined();
    expect(gatewayOptions(loadConfig({ HUB_HOST: '0.0.0.0' }), { oneProcess: false }).metricsListen).toEqual({ host: '0.0.0.0', port: 9090 });
    for (const host of ['127.0.0.1', '127.8.9.10', 'localhost', 'LOCALHOST', '::1', '[::1]', '::ffff:127.0.0.1']) expect([host, isLoopbackHost(host)]).toEqual([host, true]);
    for (const host of ['0.0.0.0', '::', '10.0.0.5', '128.0.0.1', 'hub.example.com', '::ffff:10.0.0.1']) expect([host, isLoopbackHost(host)]).toEqual([host, false]);
  });
});
