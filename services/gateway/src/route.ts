import type { MessageInitShape, MessageShape, DescMethod } from '@bufbuild/protobuf';
import type { GenService, GenServiceMethods } from '@bufbuild/protobuf/codegenv2';
import type { z } from 'zod';
import type { CallOptions, Principal } from '@agenthub/runtime';
import type { RpcContext, RpcMethod } from './jsonrpc.js';
import { parseParams } from './params.js';

/** Typed clients of the services the gateway forwards to, by service type name. */
export type Clients = ReadonlyMap<string, Record<string, (request: unknown, options?: CallOptions) => Promise<unknown>>>;

/** A JSON-RPC method that forwards to exactly one RPC; the contract test walks these. */
export type Route = RpcMethod & {
  readonly service: GenService<GenServiceMethods>;
  readonly rpc: string;
  /** The params schema the method checks first; docs/openrpc.json is generated from it. */
  readonly params?: z.ZodType;
};

type Unary<S extends GenServiceMethods> = { [K in keyof S]: S[K] extends { methodKind: 'unary' } ? K : never }[keyof S] & string;

/**
 * Declares a method: its params schema, how params become the request, and how the response
 * becomes the JSON result. Types tie all three to the RPC's generated messages.
 */
export function route<S extends GenServiceMethods, K extends Unary<S>, P>(
  clients: Clients,
  service: GenService<S>,
  rpc: K,
  spec: {
    params: z.ZodType<P>;
    request: (params: P, ctx: RpcContext) => MessageInitShape<(S[K] & DescMethod)['input']>;
    result: (response: MessageShape<(S[K] & DescMethod)['output']>, ctx: RpcContext) => unknown;
    principal?: (ctx: RpcContext) => Principal;
    /** The call may share a round trip with concurrent calls of its RPC (CallOptions.grouped; the RPC needs a grouped twin). */
    grouped?: boolean;
  },
): Route {
  return {
    service: service as unknown as GenService<GenServiceMethods>,
    rpc,
    params: spec.params,
    async invoke(raw, ctx) {
      const params = parseParams(spec.params, raw);
      const client = clients.get(service.typeName);
      if (!client) throw new Error(`No client for ${service.typeName}`);
      const principal = spec.principal ? spec.principal(ctx) : ctx.principal;
      const response = await client[rpc]!(spec.request(params, ctx), { principal, signal: ctx.signal, grouped: spec.grouped });
      return spec.result(response as MessageShape<(S[K] & DescMethod)['output']>, ctx);
    },
  };
}
