export { callerOf, GrpcServer, methodDefinition, waitSignal, type Caller, type CallContext, type ServiceHandlers, type GrpcServerOptions, type LocalHandler } from './server.js';
export { LocalTransport } from './local.js';
export { createClient, type Client, type ClientOf, type ClientOptions, type CallOptions } from './client.js';
export type { Principal } from './principal.js';
export { toStatus, fromStatus } from './status.js';
export { InternalKey } from './signature.js';
export { loadGrpcTls, type GrpcTls } from './tls.js';
export { groupedHandler, MAX_GROUPED_CALLS } from './groups.js';
