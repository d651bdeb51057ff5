import type { ErrorDialect, RpcContext } from '../jsonrpc.js';
import type { RpcError } from '../errors.js';
import { A2aError, envelopeError, toA2aRpcError } from './errors.js';

/** `1.0`, or `1.0.x`: patch numbers take no part in negotiation (A2A §3.6). */
const SERVED_VERSION = /^1\.0(\.\d+)?$/;

/**
 * The strict endpoint runs the gateway's JsonRpcHandler with these: every error in A2A's code
 * table with its ErrorInfo detail, `A2A-Version` negotiated before dispatch, and no batches (A2A
 * defines none).
 */
export const A2A_ERRORS: ErrorDialect = {
  failure: toA2aRpcError,
  envelope: (code, message) => envelopeError(code, message),
};

export function checkA2aVersion(ctx: RpcContext): RpcError | undefined {
  return ctx.a2aVersion !== undefined && SERVED_VERSION.test(ctx.a2aVersion.trim())
    ? undefined
    : toA2aRpcError(A2aError.versionNotSupported(ctx.a2aVersion));
}
