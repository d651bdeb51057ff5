/**
 * Generated protobuf-es code for every contract under `proto/`, one namespace per package.
 * Generated files live in `gen/` and are never edited by hand: change the `.proto`, then
 * `npm run generate`.
 */
export * as commonv1 from './common.js';
export * as eventsv1 from './gen/agenthub/events/v1/events_pb.js';
export * as identityv1 from './gen/agenthub/identity/v1/identity_pb.js';
export * as messagingv1 from './gen/agenthub/messaging/v1/messaging_pb.js';
export * as secretsv1 from './gen/agenthub/secrets/v1/secrets_pb.js';
export * as workspacev1 from './gen/agenthub/workspace/v1/workspace_pb.js';
export * as healthv1 from './gen/grpc/health/v1/health_pb.js';
