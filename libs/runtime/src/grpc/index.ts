export { callerOf, GrpcServer, methodDefinition, waitSignal, type Caller, type CallContext, type ServiceHandlers, type GrpcServerOptions, type LocalHandler } from './server.js';
export { LocalTransport } from './local.js';
export { createClient, type Client, type ClientOf, type ClientOptions, type CallOptions } from './client.js';
export type { Principal } from './principal.js';
export { toStatus, fromStatus } from './status.js';
export { InternalKey, signCall, verifyCall, CLOCK_SKEW_MS, MIN_INTERNAL_KEY_BYTES } from './signature.js';
export { loadGrpcTls, type GrpcTls } from './tls.js';
