import { loadConfig } from '@agenthub/runtime';
import { proxyTrust } from '../src/options.js';
import { clientAddressOf, originOf } from '../src/origin.js';

/**
 * One setting, HUB_TRUSTED_PROXIES, decides whose forwarded headers are believed, both for the
 * per-address rate limit (X-Forwarded-For) and for Agent Card links (X-Forwarded-Proto/Host);
 * HUB_RATE_TRUST_FORWARDED_FOR survives as a deprecated alias.
 */
describe('the client address of per-address limits', () => {
  it('is the peer unless the peer is a trusted proxy, whatever X-Forwarded-For says', () => {
    const address = clientAddressOf(proxyTrust(loadConfig({ HUB_TRUSTED_PROXIES: '10.0.0.0/8' })));
    expect(address('203.0.113.9', '198.51.100.1')).toBe('203.0.113.9');
    expect(address('10.0.0.2', '198.51.100.1')).toBe('198.51.100.1');
    expect(address('::ffff:10.0.0.2', '198.51.100.1')).toBe('198.51.100.1');
    expect(address('10.0.0.2', undefined)).toBe('10.0.0.2');
    // Without the setting nobody's header is believed.
    expect(clientAddressOf(proxyTrust(loadConfig({})))('10.0.0.2', '198.51.100.1')).toBe('10.0.0.2');
  });

  it('walks back from the last hop past trusted proxies, never to what the client wrote before them', () => {
    const address = clientAddressOf(proxyTrust(loadConfig({ HUB_TRUSTED_PROXIES: '10.0.0.0/8' })));
    // The client claimed 1.1.1.1; the outer proxy appended the client's real address, the inner one the outer's.
    expect(address('10.0.0.2', '1.1.1.1, 198.51.100.7, 10.0.0.9')).toBe('198.51.100.7');
    expect(address('10.0.0.2', '10.0.0.8, 10.0.0.9')).toBe('10.0.0.8');
  });

  it('HUB_RATE_TRUST_FORWARDED_FOR (deprecated) takes the last hop from any peer, for cards too; HUB_TRUSTED_PROXIES wins when both are set', () => {
    const alias = proxyTrust(loadConfig({ HUB_RATE_TRUST_FORWARDED_FOR: 'true' }));
    expect(alias).toBe('any-peer');
    expect(clientAddressOf(alias)('203.0.113.9', '1.1.1.1, 198.51.100.7')).toBe('198.51.100.7');
    const card = originOf({ trustedProxies: alias })({ remoteAddress: '203.0.113.9', encrypted: false, header: (name) => ({ host: 'pod:8080', 'x-forwarded-proto': 'https' })[name] });
    expect(card?.baseUrl).toBe('https://pod:8080');

    const both = proxyTrust(loadConfig({ HUB_RATE_TRUST_FORWARDED_FOR: 'true', HUB_TRUSTED_PROXIES: '10.0.0.1' }));
    expect(clientAddressOf(both)('203.0.113.9', '198.51.100.7')).toBe('203.0.113.9');
    expect(clientAddressOf(both)('10.0.0.1', '198.51.100.7')).toBe('198.51.100.7');
  });
});
