// The common package spans several files; its namespace (`commonv1`) holds them all.
export * from './gen/agenthub/common/v1/call_pb.js';
export * from './gen/agenthub/common/v1/error_pb.js';
export * from './gen/agenthub/common/v1/quota_pb.js';
