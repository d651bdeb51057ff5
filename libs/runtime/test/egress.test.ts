import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { checkTargetUrl, EgressClient, EgressError, egressPolicy, HubError, Reason, refusedClass, type Resolver } from '../src/index.js';

/** Regression tests of issue 12 item 2: one egress guard for every outbound call. */

describe('address policy: global unicast only', () => {
  const refused: [string, string][] = [
    ['0.0.0.0', 'unspecified'],
    ['10.1.2.3', 'private'],
    ['100.64.0.1', 'carrier-grade NAT'],
    ['127.0.0.1', 'loopback'],
    ['169.254.169.254', 'link-local (cloud metadata)'],
    ['172.16.5.4', 'private'],
    ['192.0.0.8', '192.0.0.0/24 (IETF protocol assignments)'],
    ['192.0.2.1', 'documentation'],
    ['192.168.1.1', 'private'],
    ['198.18.0.1', '198.18.0.0/15 (benchmarking)'],
    ['198.19.255.254', '198.18.0.0/15 (benchmarking)'],
    ['224.0.0.1', 'multicast'],
    ['240.0.0.1', 'reserved'],
    ['255.255.255.255', 'broadcast'],
    ['::', 'unspecified'],
    ['::1', 'loopback'],
    ['::ffff:127.0.0.1', 'IPv4-mapped loopback'],
    ['::ffff:10.0.0.1', 'IPv4-mapped private'],
    ['::ffff:169.254.169.254', 'IPv4-mapped metadata'],
    ['::127.0.0.1', 'IPv4-compatible (deprecated)'],
    ['fc00::1', 'unique local'],
    ['fd12:3456::1', 'unique local'],
    ['fe80::1', 'link-local'],
    ['fe80::1%eth0', 'link-local with zone'],
    ['fec0::1', 'site-local fec0::/10'],
    ['ff02::1', 'multicast'],
    ['2002:7f00:1::1', '6to4'],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'Teredo'],
    ['64:ff9b::7f00:1', 'NAT64 well-known prefix'],
    ['64:ff9b:1::a00:1', 'local-use NAT64 64:ff9b:1::/48'],
    ['100::1', 'discard 100::/64'],
    ['2001:db8::1', 'documentation'],
    ['4000::1', 'outside 2000::/3'],
  ];
  it.each(refused)('refuses %s (%s)', (address) => {
    expect(refusedClass(address)).toBeDefined();
  });

  it.each(['8.8.8.8', '1.1.1.1', '93.184.216.34', '2606:4700:4700::1111', '2a00:1450:4001:80b::200e', '::ffff:8.8.8.8'])(
    'allows the global unicast address %s',
    (address) => {
      expect(refusedClass(address)).toBeUndefined();
    },
  );
});

describe('checkTargetUrl', () => {
  const table: Record<string, string[]> = { 'inside.example': ['10.0.0.7'], 'outside.example': ['93.184.216.34'], 'mixed.example': ['93.184.216.34', '127.0.0.1'] };
  const resolve: Resolver = async (host) => (table[host] ?? []).map((address) => ({ address, family: 4 as const }));

  it('refuses, naming the field, a host that resolves to a private address or names one', async () => {
    for (const url of ['http://inside.example/a2a', 'http://mixed.example/', 'http://127.0.0.1:9/', 'http://[::ffff:7f00:1]/', 'http://nowhere.example/']) {
      const err = await checkTargetUrl(url, 'endpoint_url', egressPolicy(false, resolve)).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(HubError);
      expect(err).toMatchObject({ reason: Reason.INVALID_PARAMS, field: 'endpoint_url' });
      expect((err as Error).message).not.toContain('10.0.0.7');
    }
    await expect(checkTargetUrl('http://outside.example/a2a', 'endpoint_url', egressPolicy(false, resolve))).resolves.toBe('http://outside.example/a2a');
  });

  it('lets private targets through when the operator allows them', async () => {
    await expect(checkTargetUrl('http://127.0.0.1:9/a2a', 'url', egressPolicy(true, resolve))).resolves.toBe('http://127.0.0.1:9/a2a');
  });
});

describe('EgressClient', () => {
  const servers: http.Server[] = [];
  const hits: string[] = [];
  const clients: EgressClient[] = [];

  async function serve(handler: http.RequestListener): Promise<string> {
    const server = http.createServer(handler);
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  function client(allowPrivate: boolean, resolve?: Resolver, maxResponseBytes?: number): EgressClient {
    const c = new EgressClient({ policy: egressPolicy(allowPrivate, resolve), timeoutMs: 10_000, ...(maxResponseBytes ? { maxResponseBytes } : {}) });
    clients.push(c);
    return c;
  }

  let internal: string;
  beforeAll(async () => {
    internal = await serve((req, res) => {
      hits.push(req.url ?? '');
      res.end('INTERNAL-SECRET');
    });
  });
  afterAll(async () => {
    for (const c of clients) c.close();
    await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  });

  it('refuses a loopback target unless private targets are allowed, by literal and by name', async () => {
    const byName = internal.replace('127.0.0.1', 'hub-internal.example');
    const resolve: Resolver = async () => [{ address: '127.0.0.1', family: 4 }];
    const before = hits.length;
    await expect(client(false).request(internal)).rejects.toMatchObject({ failure: 'refused-address', reason: Reason.UNAVAILABLE });
    await expect(client(false, resolve).request(byName)).rejects.toMatchObject({ failure: 'refused-address' });
    expect(hits.length).toBe(before);
    const allowed = await client(true, resolve).request(byName);
    expect(allowed.status).toBe(200);
    expect(allowed.body.toString()).toBe('INTERNAL-SECRET');
  });

  it('does not follow a redirect: the redirect target receives nothing and the error holds none of its body', async () => {
    const redirecting = await serve((_req, res) => {
      res.writeHead(307, { location: `${internal}/stolen` }).end('REDIRECT-BODY');
    });
    const before = hits.length;
    const err = await client(true).request(redirecting, { method: 'POST', body: 'message' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EgressError);
    expect(err).toMatchObject({ failure: 'redirect', status: 307, message: 'The endpoint answered HTTP 307 (a redirect, not followed)' });
    expect(hits.length).toBe(before);
    expect(JSON.stringify(err)).not.toContain('REDIRECT-BODY');
  });

  it('reads no byte of an error answer; its fetch rejects with the status alone', async () => {
    const failing = await serve((_req, res) => {
      res.writeHead(502, { 'content-type': 'text/plain' }).end('PEER-ERROR-BODY');
    });
    const answer = await client(true).request(failing);
    expect(answer).toMatchObject({ status: 502 });
    expect(answer.body.length).toBe(0);
    const err = await client(true).fetch(failing, { method: 'POST', body: '{}' }).catch((e: unknown) => e);
    expect(err).toMatchObject({ failure: 'status', status: 502, message: 'The endpoint answered HTTP 502' });
    expect(String((err as Error).stack)).not.toContain('PEER-ERROR-BODY');
  });

  it('caps the response body, declared or streamed', async () => {
    const declared = await serve((_req, res) => {
      res.end('x'.repeat(5000));
    });
    const streamed = await serve((_req, res) => {
      res.writeHead(200);
      for (let i = 0; i < 10; i += 1) res.write('y'.repeat(1000));
      res.end();
    });
    await expect(client(true, undefined, 4096).request(declared)).rejects.toMatchObject({ failure: 'too-large', message: "The endpoint's answer exceeds 4096 bytes" });
    await expect(client(true, undefined, 4096).request(streamed)).rejects.toMatchObject({ failure: 'too-large' });
    await expect(client(true, undefined, 10_000).request(streamed)).resolves.toMatchObject({ status: 200 });
  });

  it("stops at the caller's signal", async () => {
    const silent = await serve(() => undefined);
    const controller = new AbortController();
    const pending = client(true).request(silent, { signal: controller.signal });
    controller.abort();
    await expect(pending).rejects.toMatchObject({ failure: 'aborted' });
  });
});
