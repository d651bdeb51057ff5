import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { identityv1 } from '@agenthub/proto';
import { createClient, HubError, InternalKey, Metrics, openDb, openKv, type CallOptions, type Client, type Db, type Kv, type Resolver, type RunningService } from '@agenthub/runtime';
import type { Backend, ProvisionedBackend } from '@agenthub/testing';
import { testLogger } from '@agenthub/testing';
import { startIdentity } from '@agenthub/identity';

type IdentityClient = Client<(typeof identityv1.IdentityService)['method']> & { close(): void };

/** A running identity service on one backend, with a client and direct access to its stores. */
export interface Harness {
  client: IdentityClient;
  db: Db;
  kv: Kv;
  /**
   * Stops the service, closes its database and Kv handles, and starts it again on new handles to
   * the same data (PGlite in a data directory on the embedded backend); migrations run again.
   */
  restart(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Host names the harness's egress guard knows (the machine has no DNS to speak of): `*.example.com`
 * is public, `intranet.example` private. Anything else does not resolve.
 */
const DNS: Record<string, string> = { 'agents.example.com': '93.184.216.34', 'example.com': '93.184.216.34', 'intranet.example': '10.0.0.7' };
export const testResolver: Resolver = async (host) => (DNS[host] ? [{ address: DNS[host]!, family: 4 }] : []);

export async function startHarness(backend: Backend, options: { allowPrivate?: boolean } = {}): Promise<Harness> {
  const provisioned: ProvisionedBackend = await backend.provision();
  // On disk rather than in memory, so that a restart can open the same data through a new handle.
  const dataDir = provisioned.databaseUrl ? undefined : await mkdtemp(join(tmpdir(), 'agenthub-identity-'));
  const open = async () => ({
    db: await openDb({ url: provisioned.databaseUrl, dataDir, schema: 'identity' }),
    kv: await openKv({ url: provisioned.redisUrl, prefix: provisioned.redisPrefix }),
  });
  let { db, kv } = await open();
  const internalKey = InternalKey.generate();
  const start = () =>
    startIdentity({
      db,
      kv,
      log: testLogger(),
      metrics: new Metrics(),
      listen: '127.0.0.1:0',
      grpcTimeoutMs: 5000,
      internalKey,
      egress: { allowPrivate: options.allowPrivate ?? false, resolve: testResolver },
    });
  let service: RunningService = await start();
  let client = createClient(identityv1.IdentityService, service.address, { defaultTimeoutMs: 5000, internalKey });
  return {
    get client() {
      return client;
    },
    get db() {
      return db;
    },
    get kv() {
      return kv;
    },
    async restart() {
      client.close();
      await service.stop(1000);
      await kv.close();
      await db.close();
      ({ db, kv } = await open());
      service = await start();
      client = createClient(identityv1.IdentityService, service.address, { defaultTimeoutMs: 5000, internalKey });
    },
    async close() {
      client.close();
      await service.stop(1000);
      await kv.close();
      await db.close();
      await provisioned.dispose();
      if (dataDir) await rm(dataDir, { recursive: true, force: true });
    },
  };
}

export const operator: CallOptions = { principal: { kind: 'operator' } };

export function asAgent(agent: { id: string; tenantId: string }): CallOptions {
  return { principal: { kind: 'agent', agentId: agent.id, tenantId: agent.tenantId } };
}

/** The HubError a call failed with; fails the test when the call succeeded. */
export async function failure(call: Promise<unknown>): Promise<HubError> {
  try {
    await call;
  } catch (err) {
    if (err instanceof HubError) return err;
    throw err;
  }
  throw new Error('Expected the call to fail, but it succeeded');
}

let counter = 0;

/** A name no other test in this process uses, so tests can share one database. */
export function unique(prefix: string): string {
  counter += 1;
  return `${prefix}-${process.pid}-${counter}`;
}

/** Creates an agent (and its tenant if needed) as the operator. */
export async function newAgent(h: Harness, tenantId: string, name = 'Agent'): Promise<{ id: string; tenantId: string; apiKey: string }> {
  const res = await h.client.createAgent({ tenantId, name, createTenant: true }, operator);
  return { id: res.agent!.id, tenantId, apiKey: res.apiKey };
}
