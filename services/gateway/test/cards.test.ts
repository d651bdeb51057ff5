import { InternalKey, Metrics, openKv, type Kv } from '@agenthub/runtime';
import { testLogger } from '@agenthub/testing';
import { createGateway, type GatewayApp } from '@agenthub/gateway';
import { originOf } from '../src/origin.js';
import { InMemoryHttp, type Peer } from './in-memory-http.js';

/**
 * Issue 12 item 4: behind a TLS ingress the cards said `http://…`, so standard clients sent their
 * API keys in clear text, and any Host header was reflected into a `public` response. The hub's
 * own card needs no upstream service, so the gateway's app (its upstreams unreachable), spoken to
 * over HTTP/1.1 from a loopback peer, shows what a client and a cache see.
 */
describe('Agent Card links', () => {
  let kv: Kv;
  const created: GatewayApp[] = [];
  const gateway = async (settings: { publicUrl?: string; trustedProxies?: string[] }) => {
    const gw = await createGateway({
      log: testLogger(),
      metrics: new Metrics(),
      kv,
      upstreams: { identity: '127.0.0.1:1', workspace: '127.0.0.1:1', secrets: '127.0.0.1:1', messaging: '127.0.0.1:1', events: '127.0.0.1:1' },
      adminToken: 'aht_cards_test_token_0000',
      maxBodyBytes: 1024 * 1024,
      maxBatch: 10,
      authCacheMs: 0,
      grpcTimeoutMs: 1_000,
      internalKey: InternalKey.generate(),
      ...settings,
    });
    created.push(gw);
    return new InMemoryHttp(gw.app.callback());
  };
  const card = async (http: InMemoryHttp, headers: Record<string, string>, peer?: Peer) => {
    const answer = await http.request('/.well-known/agent-card.json', { headers, peer });
    return { status: answer.status, headers: answer.headers as Record<string, string | undefined>, body: JSON.parse(answer.text) as { provider?: { url: string } } };
  };
  const forwarded = { Host: 'internal:8080', 'X-Forwarded-Proto': 'https', 'X-Forwarded-Host': 'hub.example.com' };

  beforeAll(async () => {
    kv = await openKv({});
  });
  afterAll(async () => {
    for (const gw of created) await gw.close();
    await kv.close();
  });

  it('uses HUB_PUBLIC_URL whatever the request says, and lets shared caches keep it', async () => {
    const gw = await gateway({ publicUrl: 'https://hub.example.com', trustedProxies: ['127.0.0.1'] });
    for (const headers of [{}, { Host: 'evil.example' }, forwarded] as Record<string, string>[]) {
      const answer = await card(gw, headers);
      expect(answer.body.provider?.url).toBe('https://hub.example.com');
      expect(answer.headers['cache-control']).toBe('public, max-age=300');
      expect(answer.headers.vary).toBeUndefined();
    }
  });

  it('believes X-Forwarded-Proto/Host from a trusted proxy: https behind a TLS ingress', async () => {
    const gw = await gateway({ trustedProxies: ['127.0.0.0/8', '::1'] });
    const answer = await card(gw, forwarded);
    expect(answer.body.provider?.url).toBe('https://hub.example.com');
    expect(answer.headers['cache-control']).toBe('private, max-age=300');
    expect(answer.headers.vary).toBe('Host, X-Forwarded-Proto, X-Forwarded-Host');
  });

  it('ignores forwarded headers from anyone else; a Host-derived card is private and varies by Host', async () => {
    const gw = await gateway({ trustedProxies: ['10.0.0.0/8'] });
    const answer = await card(gw, forwarded);
    expect(answer.body.provider?.url).toBe('http://internal:8080');
    expect(answer.headers['cache-control']).toBe('private, max-age=300');
    expect(answer.headers.vary).toBe('Host');
    const other = await card(gw, { Host: 'other.example' });
    expect(other.body.provider?.url).toBe('http://other.example');
    expect(other.headers.etag).not.toBe(answer.headers.etag);
  });

  it('links https for a request that arrived over TLS, whatever a forwarded header says', async () => {
    const gw = await gateway({});
    const answer = await card(gw, { Host: 'hub.example.com', 'X-Forwarded-Proto': 'http' }, { address: '203.0.113.9', encrypted: true });
    expect(answer.body.provider?.url).toBe('https://hub.example.com');
  });

  it('refuses a Host header that is not a host (400, never reflected)', async () => {
    const gw = await gateway({});
    // Not even node:http sends a malformed Host, so this goes as raw bytes.
    const connection = gw.connect();
    const raw = await new Promise<string>((resolve, reject) => {
      let text = '';
      connection.on('data', (chunk) => (text += chunk));
      connection.on('end', () => resolve(text));
      connection.on('error', reject);
      // Not ended: the server ends the connection once it answered (Connection: close).
      connection.write('GET /.well-known/agent-card.json HTTP/1.1\r\nHost: evil.example/x?y=\r\nConnection: close\r\n\r\n');
    });
    expect(raw).toMatch(/^HTTP\/1\.1 400/);
    expect(raw).toContain('does not name a host');
    expect(raw).not.toContain('evil.example');
  });
});

describe('originOf', () => {
  const request = (remoteAddress: string, encrypted: boolean, headers: Record<string, string>) => ({
    remoteAddress,
    encrypted,
    header: (name: string) => headers[name.toLowerCase()],
  });

  it('never answers http for a request that arrived over TLS', () => {
    const origin = originOf({ trustedProxies: ['10.0.0.1'] });
    expect(origin(request('203.0.113.9', true, { host: 'hub.example.com', 'x-forwarded-proto': 'http' }))?.baseUrl).toBe('https://hub.example.com');
    expect(origin(request('10.0.0.1', true, { host: 'hub.example.com', 'x-forwarded-proto': 'http' }))?.baseUrl).toBe('https://hub.example.com');
  });

  it('matches trusted proxies by address and range, IPv4-mapped peers included, first forwarded value only', () => {
    const origin = originOf({ trustedProxies: ['10.0.0.0/8', 'fd00::/8'] });
    const headers = { host: 'pod:8080', 'x-forwarded-proto': 'https, http', 'x-forwarded-host': 'hub.example.com, inner' };
    for (const peer of ['10.1.2.3', '::ffff:10.1.2.3', 'fd00::5']) expect(origin(request(peer, false, headers))?.baseUrl).toBe('https://hub.example.com');
    for (const peer of ['11.1.2.3', '::1', '127.0.0.1']) expect(origin(request(peer, false, headers))?.baseUrl).toBe('http://pod:8080');
  });
});
