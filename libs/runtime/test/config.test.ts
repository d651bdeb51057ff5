import { ConfigError, egressAllowPrivate, loadConfig } from '@agenthub/runtime';
import { loadCliConfig } from '@agenthub/runtime/config';

describe('loadConfig', () => {
  it('applies documented defaults', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({ HUB_HOST: '127.0.0.1', HUB_PORT: 8080, HUB_DATA_DIR: './.agenthub', HUB_MAX_BODY_BYTES: 1048576, LOG_LEVEL: 'info' });
    expect(config.DATABASE_URL).toBeUndefined();
  });

  it('treats empty variables as unset', () => {
    expect(loadConfig({ DATABASE_URL: '', HUB_PORT: '' }).HUB_PORT).toBe(8080);
  });

  it('names every bad variable at once', () => {
    let message = '';
    try {
      loadConfig({ HUB_PORT: 'eighty', DATABASE_URL: 'mysql://x', LOG_LEVEL: 'loud', HUB_ADMIN_TOKEN: 'short' });
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      message = (err as Error).message;
    }
    for (const name of ['HUB_PORT', 'DATABASE_URL', 'LOG_LEVEL', 'HUB_ADMIN_TOKEN']) expect(message).toContain(name);
    expect(message).not.toContain('short');
  });

  it('reads the public URL, trusted proxies and params depth of the gateway (issue 12 items 4, 8)', () => {
    expect(loadConfig({})).toMatchObject({ HUB_MAX_JSON_DEPTH: 32 });
    expect(loadConfig({}).HUB_PUBLIC_URL).toBeUndefined();
    const config = loadConfig({ HUB_PUBLIC_URL: 'https://agents.example.com/hub/', HUB_TRUSTED_PROXIES: '10.0.0.0/8, 127.0.0.1,::1,fd00::/8', HUB_MAX_JSON_DEPTH: '64' });
    expect(config).toMatchObject({ HUB_PUBLIC_URL: 'https://agents.example.com/hub', HUB_TRUSTED_PROXIES: ['10.0.0.0/8', '127.0.0.1', '::1', 'fd00::/8'], HUB_MAX_JSON_DEPTH: 64 });
    for (const env of [
      { HUB_PUBLIC_URL: 'agents.example.com' },
      { HUB_PUBLIC_URL: 'ftp://agents.example.com' },
      { HUB_PUBLIC_URL: 'https://user:pw@agents.example.com' },
      { HUB_PUBLIC_URL: 'https://agents.example.com/?x=1' },
      { HUB_TRUSTED_PROXIES: 'proxy.internal' },
      { HUB_TRUSTED_PROXIES: '10.0.0.0/33' },
      { HUB_MAX_JSON_DEPTH: '1' },
    ]) {
      expect(() => loadConfig(env)).toThrow(ConfigError);
    }
  });
});

describe('egressAllowPrivate', () => {
  it('is off by default; HUB_EGRESS_ALLOW_PRIVATE or its deprecated alias HUB_WEBHOOK_ALLOW_PRIVATE turns it on', () => {
    expect(egressAllowPrivate(loadConfig({}))).toBe(false);
    expect(egressAllowPrivate(loadConfig({ HUB_EGRESS_ALLOW_PRIVATE: 'true' }))).toBe(true);
    expect(egressAllowPrivate(loadConfig({ HUB_WEBHOOK_ALLOW_PRIVATE: '1' }))).toBe(true);
  });
});

describe('MESSAGING_BLOCKING_MS', () => {
  it('waits 60 s by default and at most 60 s: a larger value is refused, naming the variable', () => {
    expect(loadConfig({}).MESSAGING_BLOCKING_MS).toBe(60_000);
    expect(loadConfig({ MESSAGING_BLOCKING_MS: '60000' }).MESSAGING_BLOCKING_MS).toBe(60_000);
    expect(loadConfig({ MESSAGING_BLOCKING_MS: '5000' }).MESSAGING_BLOCKING_MS).toBe(5_000);
    for (const value of ['60001', '0']) {
      expect(() => loadConfig({ MESSAGING_BLOCKING_MS: value })).toThrow(ConfigError);
      expect(() => loadConfig({ MESSAGING_BLOCKING_MS: value })).toThrow(/MESSAGING_BLOCKING_MS/);
    }
  });
});

describe('OUTBOX_PASS_INTERVAL_MS', () => {
  it('holds relay passes 25 ms apart by default, 0 gives each commit its own, and over a second is refused, naming the variable', () => {
    expect(loadConfig({}).OUTBOX_PASS_INTERVAL_MS).toBe(25);
    expect(loadConfig({ OUTBOX_PASS_INTERVAL_MS: '0' }).OUTBOX_PASS_INTERVAL_MS).toBe(0);
    for (const value of ['1001', '-1', 'soon']) {
      expect(() => loadConfig({ OUTBOX_PASS_INTERVAL_MS: value })).toThrow(ConfigError);
      expect(() => loadConfig({ OUTBOX_PASS_INTERVAL_MS: value })).toThrow(/OUTBOX_PASS_INTERVAL_MS/);
    }
  });
});

describe('loadCliConfig', () => {
  it('reads the administration commands\' variables by the hub\'s rules, and only those', () => {
    expect(loadCliConfig({})).toEqual({ HUB_PORT: 8080, HUB_DATA_DIR: './.agenthub' });
    expect(loadCliConfig({ HUB_URL: 'https://hub.example.com', HUB_PORT: '9090', DATABASE_URL: 'not a url' })).toMatchObject({ HUB_URL: 'https://hub.example.com', HUB_PORT: 9090 });
    expect(() => loadCliConfig({ HUB_PORT: 'notaport' })).toThrow(/HUB_PORT/);
    expect(() => loadCliConfig({ HUB_URL: 'ftp://hub' })).toThrow(/HUB_URL/);
    expect(() => loadCliConfig({ HUB_ADMIN_TOKEN: 'short' })).toThrow(ConfigError);
  });
});
