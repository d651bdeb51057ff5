import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { UPSTREAMS, type UpstreamName } from '@agenthub/gateway';
import { backends, forgedCall, forgeSignature, makeTestCertificates, methodPaths, type Backend, type ForgedPrincipal, type ProvisionedBackend, type TestCertificates } from '@agenthub/testing';
import { START_TIMEOUT_MS } from './bin.js';
import { startTestHub, type TestHub } from './harness.js';
import { spawnProcess, splitMode, type SplitProcess, type SplitStack } from './split-hub.js';

/**
 * Issue 12, item 1: internal gRPC is never open. An intruder who reaches a service port of the
 * running hub (`agenthub serve all` as a real process, and split mode) with a raw grpc-js client
 * cannot act as an operator or as another tenant's agent: unsigned, wrongly signed, replayed and
 * expired calls are refused (UNAUTHENTICATED) by every service, on every method. Split processes
 * refuse to start without HUB_INTERNAL_KEY. Uses the built code (`npx tsc -b` first).
 */

const { UNAUTHENTICATED } = grpc.status;
const operator: ForgedPrincipal = { kind: 'operator' };
const otherTenantsAgent: ForgedPrincipal = { kind: 'agent', agentId: 'victim-agent', tenantId: 'victim-tenant' };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Every service's gRPC address as `serve all` logs it ("gRPC service listening"), and the gateway's URL. */
async function servingAll(proc: SplitProcess): Promise<{ url: string; addresses: Record<UpstreamName, string> }> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  let exited = false;
  void proc.exited.then(() => (exited = true));
  for (;;) {
    const output = proc.output();
    const url = /AgentHub is listening on (http:\/\/\S+)/.exec(output)?.[1];
    const addresses: Partial<Record<string, string>> = {};
    for (const line of output.split('\n')) {
      if (!line.startsWith('{')) continue;
      const entry = JSON.parse(line) as { msg?: string; service?: string; address?: string };
      if (entry.msg === 'gRPC service listening' && entry.service && entry.address) addresses[entry.service] = entry.address;
    }
    if (url && Object.keys(UPSTREAMS).every((name) => addresses[name])) return { url, addresses: addresses as Record<UpstreamName, string> };
    if (exited) throw new Error(`serve all exited while starting:\n${output}`);
    if (Date.now() > deadline) throw new Error(`serve all did not start within ${START_TIMEOUT_MS} ms:\n${output}`);
    await sleep(200);
  }
}

/** Calls that must all be refused without the key: on every method of the service at `address`. */
async function refusedWithoutKey(address: string, service: UpstreamName, credentials?: grpc.ChannelCredentials): Promise<string[]> {
  const trusted: string[] = [];
  const expires = Date.now() + 10_000;
  for (const { path, streaming } of methodPaths(UPSTREAMS[service])) {
    const variants = [
      { principal: operator },
      { principal: otherTenantsAgent },
      { principal: operator, expires, signature: forgeSignature(randomBytes(32).toString('base64'), path, operator, expires) },
      { principal: otherTenantsAgent, expires, signature: 'v1.' + randomBytes(32).toString('base64url') },
    ];
    for (const variant of variants) {
      const code = await forgedCall(address, path, streaming, variant, credentials);
      if (code !== UNAUTHENTICATED) trusted.push(`${path} ${JSON.stringify(variant.principal)} signed=${variant.signature !== undefined}: ${grpc.status[code]}`);
    }
  }
  return trusted;
}

/** An admin call through the gateway: the hub's own signed calls still work. */
async function adminCall(url: string, token: string, method: string, params: unknown = {}): Promise<any> {
  const response = await fetch(`${url}/admin`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  const body = (await response.json()) as { result?: unknown; error?: unknown };
  if (body.error) throw new Error(`${method}: ${JSON.stringify(body.error)}`);
  return body.result;
}

const allInOne: { backend: Backend; transport: 'grpc' | 'inproc' }[] = [
  ...backends().map((backend) => ({ backend, transport: 'grpc' as const })),
  // The in-process transport skips the network between the hub's own services; the ports stay shut.
  { backend: backends()[0]!, transport: 'inproc' },
];

describe.each(allInOne)('agenthub serve all as a process ($backend.name, HUB_TRANSPORT=$transport)', ({ backend, transport }) => {
  let proc: SplitProcess;
  let provisioned: ProvisionedBackend;
  let dataDir: string;
  let url: string;
  let addresses: Record<UpstreamName, string>;
  const adminToken = `admin-${randomBytes(16).toString('hex')}`;

  beforeAll(async () => {
    provisioned = await backend.provision();
    dataDir = mkdtempSync(join(tmpdir(), 'agenthub-internal-'));
    proc = spawnProcess('all', 'all', {
      HUB_HOST: '127.0.0.1',
      HUB_PORT: '0',
      HUB_DATA_DIR: dataDir,
      HUB_ADMIN_TOKEN: adminToken,
      HUB_TRANSPORT: transport,
      // What `npm start` runs on the gRPC transport; the in-process one keeps its databases in memory.
      ...(transport === 'inproc' ? { HUB_EMBEDDED_STORAGE: 'memory' } : {}),
      // The container's default: serve all binds its services to loopback all the same.
      GRPC_HOST: '0.0.0.0',
      HUB_METRICS: 'false',
      LOG_LEVEL: 'info',
      EMBEDDINGS_THREADS: '1',
      ...(provisioned.databaseUrl ? { DATABASE_URL: provisioned.databaseUrl, DATABASE_POOL_SIZE: '4' } : {}),
      ...(provisioned.redisUrl ? { REDIS_URL: provisioned.redisUrl, REDIS_PREFIX: provisioned.redisPrefix } : {}),
    }, '');
    ({ url, addresses } = await servingAll(proc));
  }, START_TIMEOUT_MS + 10_000);

  afterAll(async () => {
    const exit = await proc?.stop();
    rmSync(dataDir, { recursive: true, force: true });
    await provisioned?.dispose();
    expect(exit).toEqual({ code: 0, signal: null });
  }, 60_000);

  it('binds every service to loopback, even with GRPC_HOST=0.0.0.0', () => {
    for (const address of Object.values(addresses)) expect(address).toMatch(/^127\.0\.0\.1:\d+$/);
  });

  it('refuses forged principals (operator, another tenant\'s agent), unsigned or signed without the key, on every method of every service port', async () => {
    const trusted: string[] = [];
    for (const name of Object.keys(UPSTREAMS) as UpstreamName[]) trusted.push(...(await refusedWithoutKey(addresses[name], name)));
    expect(trusted).toEqual([]);
  }, 120_000);

  it('still serves the gateway, whose calls are signed with the process\'s key', async () => {
    const created = await adminCall(url, adminToken, 'agents.create', { tenant_id: 'acme', name: 'worker', create_tenant: true });
    expect(created.agent.tenant_id).toBe('acme');
    expect((await adminCall(url, adminToken, 'tenants.list')).tenants.map((t: { id: string }) => t.id)).toContain('acme');
  });
});

const real = backends().find((backend) => backend.name === 'postgres+redis');
const describeSplit = real ? describe : describe.skip;
if (!real) console.warn('[internal-calls.e2e] split mode skipped: real PostgreSQL and Redis are not reachable');

const splitTransports = [
  // The chart's default (grpcTls.enabled false): plaintext between pods, so signatures alone hold.
  { transport: 'plaintext', tls: false },
  { transport: 'mutual TLS', tls: true },
];

describeSplit.each(splitTransports)('split mode with HUB_INTERNAL_KEY over $transport', ({ tls }) => {
  let hub: TestHub & SplitStack;
  let certsDir: string | undefined;
  let certs: TestCertificates;
  const key = randomBytes(32).toString('base64');
  /** What an intruder's client presents: a valid certificate under mutual TLS, nothing in plaintext. */
  let intruder: grpc.ChannelCredentials;

  beforeAll(async () => {
    let env: Record<string, string> = { HUB_INTERNAL_KEY: key };
    if (tls) {
      certsDir = mkdtempSync(join(tmpdir(), 'agenthub-split-mtls-'));
      certs = makeTestCertificates(certsDir);
      intruder = grpc.credentials.createSsl(readFileSync(certs.ca), readFileSync(certs.key), readFileSync(certs.cert));
      env = { ...env, GRPC_TLS_CERT_FILE: certs.cert, GRPC_TLS_KEY_FILE: certs.key, GRPC_TLS_CA_FILE: certs.ca };
    } else {
      intruder = grpc.credentials.createInsecure();
    }
    hub = await startTestHub(splitMode(real!), env);
  }, 180_000);
  afterAll(async () => {
    await hub?.stop();
    if (certsDir) rmSync(certsDir, { recursive: true, force: true });
  }, 60_000);

  /** One address per service (a replica's, where the stack runs two). */
  const address = (name: UpstreamName) => hub.services[UPSTREAMS[name].typeName]!.split(',')[0]!;

  it('serves agents through the gateway with signed calls', async () => {
    const alice = await hub.agent('acme', 'alice');
    const { workspace } = await hub.ok(alice.api_key, 'x-hub/workspace.create', { name: 'w' });
    expect(workspace.id).toEqual(expect.any(String));
  });

  if (tls) it('refuses a client without a certificate, or one from another CA, on every service port', async () => {
    const noCert = grpc.credentials.createSsl(readFileSync(certs.ca));
    const stranger = grpc.credentials.createSsl(readFileSync(certs.ca), readFileSync(certs.strangerKey), readFileSync(certs.strangerCert));
    for (const name of Object.keys(UPSTREAMS) as UpstreamName[]) {
      const { path } = methodPaths(UPSTREAMS[name])[0]!;
      const expires = Date.now() + 10_000;
      const signed = { principal: operator, expires, signature: forgeSignature(key, path, operator, expires) };
      for (const credentials of [noCert, stranger, grpc.credentials.createInsecure()]) {
        expect({ name, code: grpc.status[await forgedCall(address(name), path, false, signed, credentials)] }).toEqual({ name, code: 'UNAVAILABLE' });
      }
    }
  }, 120_000);

  it(`refuses forged principals from a client ${tls ? 'with a valid certificate ' : ''}without the key, on every method of every service`, async () => {
    const trusted: string[] = [];
    for (const name of Object.keys(UPSTREAMS) as UpstreamName[]) trusted.push(...(await refusedWithoutKey(address(name), name, intruder)));
    expect(trusted).toEqual([]);
  }, 180_000);

  it('refuses a valid signature replayed on another method, for another principal, with a later expiry, or expired', async () => {
    const alice = await hub.agent('acme', 'replayed');
    const aliceP: ForgedPrincipal = { kind: 'agent', agentId: alice.agent_id, tenantId: alice.tenant_id };
    for (const name of Object.keys(UPSTREAMS) as UpstreamName[]) {
      const [first, second] = methodPaths(UPSTREAMS[name]).filter((m) => !m.streaming);
      if (!first || !second) throw new Error(`${name} has fewer than two unary methods`);
      const expires = Date.now() + 10_000;
      const signed = forgeSignature(key, first.path, aliceP, expires);
      const expired = Date.now() - 10_000;
      const codes = {
        name,
        // The control: the test signs as the hub does, so the refusals below come from what changed.
        genuine: await forgedCall(address(name), first.path, false, { principal: aliceP, expires, signature: signed }, intruder),
        otherMethod: await forgedCall(address(name), second.path, false, { principal: aliceP, expires, signature: signed }, intruder),
        asOperator: await forgedCall(address(name), first.path, false, { principal: operator, expires, signature: signed }, intruder),
        asOtherTenant: await forgedCall(address(name), first.path, false, { principal: otherTenantsAgent, expires, signature: signed }, intruder),
        laterExpiry: await forgedCall(address(name), first.path, false, { principal: aliceP, expires: expires + 3_600_000, signature: signed }, intruder),
        expired: await forgedCall(address(name), first.path, false, { principal: aliceP, expires: expired, signature: forgeSignature(key, first.path, aliceP, expired) }, intruder),
      };
      expect(codes.genuine).not.toBe(UNAUTHENTICATED);
      expect(codes).toEqual({ name, genuine: codes.genuine, otherMethod: UNAUTHENTICATED, asOperator: UNAUTHENTICATED, asOtherTenant: UNAUTHENTICATED, laterExpiry: UNAUTHENTICATED, expired: UNAUTHENTICATED });
    }
  }, 120_000);
});

describe('split-mode processes refuse to start without a usable HUB_INTERNAL_KEY', () => {
  const addrs = {
    IDENTITY_ADDR: '127.0.0.1:1',
    WORKSPACE_ADDR: '127.0.0.1:1',
    SECRETS_ADDR: '127.0.0.1:1',
    MESSAGING_ADDR: '127.0.0.1:1',
    EVENTS_ADDR: '127.0.0.1:1',
    HUB_ADMIN_TOKEN: `admin-${randomBytes(16).toString('hex')}`,
    HUB_PORT: '0',
    GRPC_PORT: '0',
    OPS_PORT: '0',
  };

  it.each([
    ['identity', 'without the key', {}, /HUB_INTERNAL_KEY is required in split mode/],
    ['gateway', 'without the key', {}, /HUB_INTERNAL_KEY is required in split mode/],
    ['identity', 'bound to loopback without the key', { GRPC_HOST: '127.0.0.1' }, /HUB_INTERNAL_KEY is required in split mode/],
    ['messaging', 'with a 16-byte key', { HUB_INTERNAL_KEY: randomBytes(16).toString('base64') }, /HUB_INTERNAL_KEY must be base64 of at least 32 random bytes/],
    ['secrets', 'with a TLS certificate but no key or CA file', { HUB_INTERNAL_KEY: randomBytes(32).toString('base64'), GRPC_TLS_CERT_FILE: '/nonexistent.crt' }, /Mutual TLS needs .*missing GRPC_TLS_KEY_FILE, GRPC_TLS_CA_FILE/],
  ])('agenthub serve %s %s exits 2 naming the setting', async (service, _case, env, message) => {
    const proc = spawnProcess(service, service, { ...addrs, ...env }, '');
    const exit = await proc.exited;
    expect({ exit, output: proc.output() }).toEqual({ exit: { code: 2, signal: null }, output: expect.stringMatching(message) });
    if ('HUB_INTERNAL_KEY' in env) expect(proc.output()).not.toContain(env.HUB_INTERNAL_KEY);
  }, 60_000);
});
