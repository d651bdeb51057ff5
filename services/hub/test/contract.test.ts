import { readdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { create } from '@bufbuild/protobuf';
import type { DescService } from '@bufbuild/protobuf';
import { healthv1 } from '@agenthub/proto';
import { methodDefinition } from '@agenthub/runtime';
import { adminMethods, agentMethods } from '@agenthub/gateway';
import { backends } from '@agenthub/testing';
import { startTestHub, type TestHub } from './harness.js';

/** Every service declared anywhere under proto/, found from the generated code itself. */
async function declaredServices(): Promise<DescService[]> {
  const root = new URL('../../../libs/proto/src/gen/', import.meta.url);
  const files = (await readdir(fileURLToPath(root), { recursive: true })).filter((f) => f.endsWith('_pb.ts'));
  const services: DescService[] = [];
  for (const file of files) {
    const module = (await import(fileURLToPath(new URL(file, root)))) as Record<string, unknown>;
    for (const value of Object.values(module)) {
      if (value && typeof value === 'object' && (value as DescService).kind === 'service') services.push(value as DescService);
    }
  }
  return services;
}

/** Calls a method with an empty request; the status code says whether a handler exists. */
function probe(address: string, service: DescService, methodName: string): Promise<grpc.status> {
  const method = service.methods.find((m) => m.name === methodName)!;
  const def = methodDefinition(method);
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  return new Promise((resolve) => {
    const done = (code: grpc.status) => {
      client.close();
      resolve(code);
    };
    const request = create(method.input);
    const deadline = new Date(Date.now() + 5_000);
    if (method.methodKind === 'server_streaming') {
      const call = client.makeServerStreamRequest(def.path, def.requestSerialize, def.responseDeserialize, request, new grpc.Metadata(), { deadline });
      call.on('data', () => undefined);
      call.on('error', (err: grpc.ServiceError) => done(err.code));
      call.on('end', () => done(grpc.status.OK));
    } else {
      client.makeUnaryRequest(def.path, def.requestSerialize, def.responseDeserialize, request, new grpc.Metadata(), { deadline }, (err) =>
        done(err ? err.code : grpc.status.OK),
      );
    }
  });
}

describe('contracts', () => {
  let hub: TestHub;
  let services: DescService[];

  beforeAll(async () => {
    hub = await startTestHub(backends()[0]!);
    services = await declaredServices();
  });
  afterAll(() => hub?.stop());

  it('finds the services of proto/', () => {
    expect(services.map((s) => s.typeName)).toEqual(
      expect.arrayContaining(['agenthub.identity.v1.IdentityService', 'agenthub.workspace.v1.WorkspaceService', 'grpc.health.v1.Health']),
    );
  });

  it('serves every RPC of every declared service', async () => {
    const unimplemented: string[] = [];
    for (const service of services) {
      const addresses = service.typeName === healthv1.Health.typeName ? Object.values(hub.services) : [hub.services[service.typeName]];
      for (const address of addresses) {
        if (!address) {
          unimplemented.push(`${service.typeName} (no server)`);
          continue;
        }
        for (const method of service.methods) {
          if ((await probe(address, service, method.name)) === grpc.status.UNIMPLEMENTED) {
            unimplemented.push(`${service.typeName}/${method.name} at ${address}`);
          }
        }
      }
    }
    expect(unimplemented).toEqual([]);
  });

  it('maps every JSON-RPC method of the gateway to an RPC that exists', () => {
    const declared = new Map(services.map((s) => [s.typeName, s]));
    const routes = [...agentMethods(new Map()), ...adminMethods(new Map())];
    expect(routes.length).toBeGreaterThan(0);
    for (const [name, route] of routes) {
      const service = declared.get(route.service.typeName);
      expect({ name, service: service?.typeName }).toEqual({ name, service: route.service.typeName });
      expect({ name, rpc: service!.methods.some((m) => m.localName === route.rpc) }).toEqual({ name, rpc: true });
    }
  });

  it('exposes every workspace method the interface names', () => {
    const names = [...agentMethods(new Map()).keys()];
    for (const method of ['create', 'get', 'list', 'delete', 'members.add', 'members.remove', 'members.list', 'types']) {
      expect(names).toContain(`x-hub/workspace.${method}`);
    }
    for (const method of ['request', 'approve', 'revoke', 'list']) expect(names).toContain(`x-hub/grants.${method}`);
  });
});
