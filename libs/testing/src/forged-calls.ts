import { createHmac } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import type { DescService } from '@bufbuild/protobuf';

/**
 * Raw grpc-js calls made the way an intruder on the network would: no project client, principal
 * metadata written by hand, signatures computed (or not) here with node:crypto from the wire format
 * the hub documents (docs/security.md, "Internal calls"), so these tests pin that format too.
 */

export type ForgedPrincipal = { kind: 'operator' } | { kind: 'agent'; agentId: string; tenantId: string } | { kind: 'none' };

export interface ForgedCall {
  principal: ForgedPrincipal;
  /** `x-hub-expires` (ms since the epoch); absent when undefined. */
  expires?: number;
  /** `x-hub-signature`; absent when undefined. */
  signature?: string;
  /** Extra metadata, e.g. a principal added after signing. */
  extra?: Record<string, string>;
}

/** `v1.<base64url HMAC-SHA256>` over the method's path, the principal and the expiry rounded up to a whole second, as a service expects it. */
export function forgeSignature(keyBase64: string, path: string, principal: ForgedPrincipal, expires: number): string {
  const fields = principal.kind === 'agent' ? ['agent', principal.agentId, principal.tenantId] : [principal.kind, '', ''];
  const mac = createHmac('sha256', Buffer.from(keyBase64, 'base64')).update(JSON.stringify(['v1', path, ...fields, Math.ceil(expires / 1000) * 1000])).digest('base64url');
  return `v1.${mac}`;
}

/** Every method of `service` as its gRPC path, with whether it streams its response. */
export function methodPaths(service: DescService): { path: string; streaming: boolean }[] {
  return service.methods.map((method) => ({ path: `/${service.typeName}/${method.name}`, streaming: method.methodKind === 'server_streaming' }));
}

/**
 * Calls `path` at `address` with an empty request and the given metadata; resolves with the gRPC
 * status code the call ended with (OK when it succeeded). `credentials` defaults to plaintext.
 */
export function forgedCall(address: string, path: string, streaming: boolean, call: ForgedCall, credentials = grpc.credentials.createInsecure()): Promise<grpc.status> {
  const metadata = new grpc.Metadata();
  if (call.principal.kind === 'operator') metadata.set('x-hub-operator', '1');
  if (call.principal.kind === 'agent') {
    metadata.set('x-hub-agent-id', call.principal.agentId);
    metadata.set('x-hub-tenant-id', call.principal.tenantId);
  }
  if (call.expires !== undefined) metadata.set('x-hub-expires', String(call.expires));
  if (call.signature !== undefined) metadata.set('x-hub-signature', call.signature);
  for (const [key, value] of Object.entries(call.extra ?? {})) metadata.set(key, value);
  const client = new grpc.Client(address, credentials);
  const deadline = new Date(Date.now() + 10_000);
  const serialize = (value: Buffer) => value;
  const deserialize = (bytes: Buffer) => bytes;
  return new Promise<grpc.status>((resolve) => {
    const done = (code: grpc.status) => {
      client.close();
      resolve(code);
    };
    if (streaming) {
      const stream = client.makeServerStreamRequest(path, serialize, deserialize, Buffer.alloc(0), metadata, { deadline });
      let ended = false;
      stream.on('data', () => {
        // Data means the service trusted the call; stop here and report it.
        if (!ended) {
          ended = true;
          stream.cancel();
          done(grpc.status.OK);
        }
      });
      stream.on('error', (err: grpc.ServiceError) => {
        if (!ended) {
          ended = true;
          done(err.code);
        }
      });
      stream.on('end', () => {
        if (!ended) {
          ended = true;
          done(grpc.status.OK);
        }
      });
    } else {
      client.makeUnaryRequest(path, serialize, deserialize, Buffer.alloc(0), metadata, { deadline }, (err) => done(err ? err.code : grpc.status.OK));
    }
  });
}
