import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { healthv1, identityv1, messagingv1 } from '@agenthub/proto';
import { ConfigError, createClient, GrpcServer, HubError, InternalKey, loadGrpcTls, Metrics, Reason, type CallContext, type GrpcTls } from '@agenthub/runtime';
import { forgedCall, forgeSignature, makeTestCertificates, testLogger, type ForgedPrincipal, type TestCertificates } from '@agenthub/testing';

/**
 * Issue 12, item 1: a service trusts the principal of a call only when the call is signed with the
 * deployment's internal key over its method, principal and expiry. Raw grpc-js calls (not the
 * project's client) play an intruder who reached the port.
 */

const KEY = randomBytes(32).toString('base64');
const internalKey = InternalKey.fromBase64(KEY);
const GET_AGENT = `/${identityv1.IdentityService.typeName}/GetAgent`;
const LIST_TENANTS = `/${identityv1.IdentityService.typeName}/ListTenants`;
const WATCH_TASK = `/${messagingv1.MessagingService.typeName}/WatchTask`;
const operator: ForgedPrincipal = { kind: 'operator' };
const alice: ForgedPrincipal = { kind: 'agent', agentId: 'alice', tenantId: 'acme' };
const mallory: ForgedPrincipal = { kind: 'agent', agentId: 'mallory', tenantId: 'evil' };
const { UNAUTHENTICATED, OK } = grpc.status;

/** Identity and messaging on one server; every handler records the principal it was given. */
async function serve(options: { tls?: GrpcTls } = {}) {
  const seen: (CallContext['principal'] | 'none')[] = [];
  const record = (ctx: CallContext) => seen.push(ctx.principal ?? 'none');
  const unary = new Proxy({}, { get: () => async (_req: unknown, ctx: CallContext) => (record(ctx), {}) });
  const streams = new Proxy({}, {
    get: () =>
      async function* (_req: unknown, ctx: CallContext) {
        record(ctx);
        yield {};
      },
  });
  const server = new GrpcServer({ log: testLogger(), metrics: new Metrics(), internalKey, ...options });
  server.add(identityv1.IdentityService, unary as never);
  server.add(messagingv1.MessagingService, new Proxy({}, { get: (_t, name: string) => (name === 'watchTask' ? (streams as never)[name] : (unary as never)[name]) }) as never);
  const port = await server.listen('127.0.0.1:0');
  return { server, address: `127.0.0.1:${port}`, seen };
}

describe('internal calls: signed principals', () => {
  let running: Awaited<ReturnType<typeof serve>>;
  beforeAll(async () => {
    running = await serve();
  });
  afterAll(() => running.server.shutdown(100));
  beforeEach(() => running.seen.splice(0));

  const soon = () => Date.now() + 10_000;
  const unary = (call: Parameters<typeof forgedCall>[3], path = GET_AGENT) => forgedCall(running.address, path, false, call);

  it('trusts the principal of a call signed by the project\'s client, agent, operator or none', async () => {
    const client = createClient(identityv1.IdentityService, running.address, { defaultTimeoutMs: 2000, internalKey });
    try {
      await client.getAgent({}, { principal: { kind: 'agent', agentId: 'alice', tenantId: 'acme' } });
      await client.getAgent({}, { principal: { kind: 'operator' } });
      await client.authenticate({});
      expect(running.seen).toEqual([{ kind: 'agent', agentId: 'alice', tenantId: 'acme' }, { kind: 'operator' }, 'none']);
    } finally {
      client.close();
    }
    // The test's own signing agrees with the wire format, so the refusals below are meaningful.
    const expires = soon();
    expect(await unary({ principal: operator, expires, signature: forgeSignature(KEY, GET_AGENT, operator, expires) })).toBe(OK);
  });

  it('refuses a forged operator or another tenant\'s agent sent without a signature, on unary and streaming methods', async () => {
    expect(await unary({ principal: operator })).toBe(UNAUTHENTICATED);
    expect(await unary({ principal: mallory })).toBe(UNAUTHENTICATED);
    expect(await unary({ principal: operator, expires: soon() })).toBe(UNAUTHENTICATED);
    expect(await forgedCall(running.address, WATCH_TASK, true, { principal: alice })).toBe(UNAUTHENTICATED);
    expect(running.seen).toEqual([]);
  });

  it('refuses a signature made with another key, or garbage', async () => {
    const expires = soon();
    const otherKey = randomBytes(32).toString('base64');
    expect(await unary({ principal: operator, expires, signature: forgeSignature(otherKey, GET_AGENT, operator, expires) })).toBe(UNAUTHENTICATED);
    expect(await unary({ principal: operator, expires, signature: 'v1.AAAA' })).toBe(UNAUTHENTICATED);
    expect(await unary({ principal: operator, expires, signature: forgeSignature(KEY, GET_AGENT, operator, expires).replace('v1.', 'v2.') })).toBe(UNAUTHENTICATED);
    expect(running.seen).toEqual([]);
  });

  it('refuses a valid signature replayed on another method, with another principal, or with another expiry', async () => {
    const expires = soon();
    const signed = forgeSignature(KEY, GET_AGENT, alice, expires);
    expect(await unary({ principal: alice, expires, signature: signed })).toBe(OK);
    expect(await unary({ principal: alice, expires, signature: signed }, LIST_TENANTS)).toBe(UNAUTHENTICATED);
    expect(await forgedCall(running.address, WATCH_TASK, true, { principal: alice, expires, signature: signed })).toBe(UNAUTHENTICATED);
    expect(await unary({ principal: mallory, expires, signature: signed })).toBe(UNAUTHENTICATED);
    expect(await unary({ principal: { kind: 'agent', agentId: 'alice', tenantId: 'evil' }, expires, signature: signed })).toBe(UNAUTHENTICATED);
    expect(await unary({ principal: operator, expires, signature: signed })).toBe(UNAUTHENTICATED);
    // The operator flag added to a signed agent call turns it into another principal.
    expect(await unary({ principal: alice, expires, signature: signed, extra: { 'x-hub-operator': '1' } })).toBe(UNAUTHENTICATED);
    expect(await unary({ principal: alice, expires: expires + 60_000, signature: signed })).toBe(UNAUTHENTICATED);
    // A call signed without a principal cannot be given one.
    const anonymous = forgeSignature(KEY, GET_AGENT, { kind: 'none' }, expires);
    expect(await unary({ principal: operator, expires, signature: anonymous })).toBe(UNAUTHENTICATED);
    expect(running.seen).toEqual([{ kind: 'agent', agentId: 'alice', tenantId: 'acme' }]);
  });

  it('checks a signature it accepted before like any other: another one for the same call, or a later second, is refused', async () => {
    // Whole seconds, so that the second of expiry moves by a second exactly.
    const expires = Math.ceil(soon() / 1000) * 1000;
    const signed = forgeSignature(KEY, GET_AGENT, alice, expires);
    expect(await unary({ principal: alice, expires, signature: signed })).toBe(OK);
    const bytes = Buffer.from(signed.slice(3), 'base64url');
    bytes[0]! ^= 1;
    const tampered = `v1.${bytes.toString('base64url')}`;
    expect(await unary({ principal: alice, expires, signature: tampered })).toBe(UNAUTHENTICATED);
    // x-hub-expires may name any millisecond of the signed second, and no later one.
    expect(await unary({ principal: alice, expires: expires - 999, signature: signed })).toBe(OK);
    expect(await unary({ principal: alice, expires: expires + 1, signature: signed })).toBe(UNAUTHENTICATED);
    expect(await unary({ principal: alice, expires: expires - 1000, signature: signed })).toBe(UNAUTHENTICATED);
    expect(running.seen).toHaveLength(2);
  });

  it('refuses an expired signature', async () => {
    const expired = Date.now() - 10_000;
    expect(await unary({ principal: operator, expires: expired, signature: forgeSignature(KEY, GET_AGENT, operator, expired) })).toBe(UNAUTHENTICATED);
    expect(running.seen).toEqual([]);
  });

  it('keeps grpc.health.v1 open to unsigned probes', async () => {
    const health = new grpc.Client(running.address, grpc.credentials.createInsecure());
    const def = { path: `/${healthv1.Health.typeName}/Check`, serialize: (b: Buffer) => b, deserialize: (b: Buffer) => b };
    const code = await new Promise<grpc.status>((resolve) =>
      health.makeUnaryRequest(def.path, def.serialize, def.deserialize, Buffer.alloc(0), new grpc.Metadata(), (err) => resolve(err ? err.code : OK)),
    );
    health.close();
    expect(code).toBe(OK);
  });

  it('makes the project\'s client fail with UNAUTHENTICATED when its key differs', async () => {
    const client = createClient(identityv1.IdentityService, running.address, { defaultTimeoutMs: 2000, internalKey: InternalKey.generate() });
    try {
      const err = await client.getAgent({}, { principal: { kind: 'operator' } }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(HubError);
      expect((err as HubError).reason).toBe(Reason.UNAUTHENTICATED);
    } finally {
      client.close();
    }
  });

  it('rotates without refusals: a server given "<new>,<old>" accepts both, a client given it signs with the new one', async () => {
    const next = randomBytes(32).toString('base64');
    const rotating = InternalKey.fromBase64(`${next},${KEY}`);
    const server = new GrpcServer({ log: testLogger(), metrics: new Metrics(), internalKey: rotating });
    server.add(identityv1.IdentityService, new Proxy({}, { get: () => async () => ({}) }) as never);
    const address = `127.0.0.1:${await server.listen('127.0.0.1:0')}`;
    const clients = [
      createClient(identityv1.IdentityService, address, { defaultTimeoutMs: 2000, internalKey }),
      createClient(identityv1.IdentityService, address, { defaultTimeoutMs: 2000, internalKey: InternalKey.fromBase64(next) }),
      createClient(identityv1.IdentityService, address, { defaultTimeoutMs: 2000, internalKey: rotating }),
    ];
    try {
      for (const client of clients) await client.getAgent({}, { principal: { kind: 'operator' } });
      // What the rotating client signs, a server that already dropped the old key accepts.
      const expires = Date.now() + 10_000;
      const signature = `v1.${rotating.mac(GET_AGENT, { kind: 'operator' }, expires).toString('base64url')}`;
      expect(signature).toBe(forgeSignature(next, GET_AGENT, operator, expires));
      expect(await forgedCall(address, GET_AGENT, false, { principal: operator, expires, signature: forgeSignature(randomBytes(32).toString('base64'), GET_AGENT, operator, expires) })).toBe(UNAUTHENTICATED);
    } finally {
      for (const client of clients) client.close();
      await server.shutdown(100);
    }
  });

  it('takes HUB_INTERNAL_KEY only as base64 of at least 32 bytes, never echoing it', () => {
    const short = randomBytes(16).toString('base64');
    expect(() => InternalKey.fromBase64(short)).toThrow(ConfigError);
    expect(() => InternalKey.fromBase64(short)).not.toThrow(short);
    expect(() => InternalKey.fromBase64('not base64 at all, but long enough to be 32 bytes!!')).toThrow(/HUB_INTERNAL_KEY/);
    expect(JSON.stringify({ internalKey })).toBe('{"internalKey":{}}');
  });
});

describe('internal calls: mutual TLS (GRPC_TLS_*)', () => {
  let dir: string;
  let certs: TestCertificates;
  let tls: GrpcTls;
  let running: Awaited<ReturnType<typeof serve>>;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'agenthub-mtls-'));
    certs = makeTestCertificates(dir);
    tls = (await loadGrpcTls({ GRPC_TLS_CERT_FILE: certs.cert, GRPC_TLS_KEY_FILE: certs.key, GRPC_TLS_CA_FILE: certs.ca }))!;
    running = await serve({ tls });
  }, 60_000);
  afterAll(async () => {
    await running?.server.shutdown(100);
    rmSync(dir, { recursive: true, force: true });
  });

  const file = (path: string) => readFileSync(path);
  const signed = () => {
    const expires = Date.now() + 10_000;
    return { principal: operator, expires, signature: forgeSignature(KEY, GET_AGENT, operator, expires) };
  };

  it('serves the project\'s client presenting its certificate', async () => {
    const client = createClient(identityv1.IdentityService, running.address, { defaultTimeoutMs: 5000, internalKey, tls });
    try {
      await client.getAgent({}, { principal: { kind: 'operator' } });
      expect(running.seen).toEqual([{ kind: 'operator' }]);
    } finally {
      client.close();
    }
  });

  it('refuses a client without a certificate, with one from another CA, or in plaintext, even with a valid signature', async () => {
    const noCert = grpc.credentials.createSsl(file(certs.ca));
    const strangerCert = grpc.credentials.createSsl(file(certs.ca), file(certs.strangerKey), file(certs.strangerCert));
    for (const credentials of [noCert, strangerCert, grpc.credentials.createInsecure()]) {
      expect(await forgedCall(running.address, GET_AGENT, false, signed(), credentials)).toBe(grpc.status.UNAVAILABLE);
    }
    // With the right certificate the signature is still required.
    const good = grpc.credentials.createSsl(file(certs.ca), file(certs.key), file(certs.cert));
    expect(await forgedCall(running.address, GET_AGENT, false, { principal: operator }, good)).toBe(UNAUTHENTICATED);
    expect(await forgedCall(running.address, GET_AGENT, false, signed(), good)).toBe(OK);
  });

  it('needs all three files, and names the one it cannot read', async () => {
    await expect(loadGrpcTls({ GRPC_TLS_CERT_FILE: certs.cert })).rejects.toThrow(/missing GRPC_TLS_KEY_FILE, GRPC_TLS_CA_FILE/);
    await expect(loadGrpcTls({ GRPC_TLS_CERT_FILE: certs.cert, GRPC_TLS_KEY_FILE: certs.key, GRPC_TLS_CA_FILE: join(dir, 'nope.crt') })).rejects.toThrow(/GRPC_TLS_CA_FILE: cannot read/);
    expect(await loadGrpcTls({})).toBeUndefined();
  });
});
