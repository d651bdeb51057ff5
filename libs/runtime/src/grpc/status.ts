import { Metadata, status, type ServiceError, type StatusObject } from '@grpc/grpc-js';
import { create, fromBinary } from '@bufbuild/protobuf';
import { commonv1 } from '@agenthub/proto';
import { HubError, Reason } from '../errors.js';
import { encodeMessage } from './wire.js';

const DETAIL_KEY = 'agenthub-error-bin';

/** The gRPC status each reason travels as; the precise reason rides in the detail trailer. */
const statusOf: Record<Reason, status> = {
  [Reason.UNSPECIFIED]: status.UNKNOWN,
  [Reason.INVALID_PARAMS]: status.INVALID_ARGUMENT,
  [Reason.NOT_FOUND]: status.NOT_FOUND,
  [Reason.ACCESS_DENIED]: status.PERMISSION_DENIED,
  [Reason.PERMISSION_REQUIRED]: status.PERMISSION_DENIED,
  [Reason.INVALID_OPERATION]: status.FAILED_PRECONDITION,
  [Reason.GRANT_REQUIRED]: status.PERMISSION_DENIED,
  [Reason.UNAUTHENTICATED]: status.UNAUTHENTICATED,
  [Reason.ALREADY_EXISTS]: status.ALREADY_EXISTS,
  [Reason.TASK_NOT_FOUND]: status.NOT_FOUND,
  [Reason.TASK_NOT_CANCELABLE]: status.FAILED_PRECONDITION,
  [Reason.CONTENT_TYPE_NOT_SUPPORTED]: status.INVALID_ARGUMENT,
  [Reason.LIMIT_EXCEEDED]: status.RESOURCE_EXHAUSTED,
  [Reason.UNAVAILABLE]: status.UNAVAILABLE,
  [Reason.DEADLINE_EXCEEDED]: status.DEADLINE_EXCEEDED,
  [Reason.INTERNAL]: status.INTERNAL,
  [Reason.RATE_LIMITED]: status.RESOURCE_EXHAUSTED,
  [Reason.QUOTA_EXCEEDED]: status.RESOURCE_EXHAUSTED,
};

/** Statuses raised by grpc-js itself (no detail trailer): transport trouble, not a bug. */
const bareStatuses: Partial<Record<status, { reason: Reason; message: string }>> = {
  [status.UNAVAILABLE]: { reason: Reason.UNAVAILABLE, message: 'A service the hub depends on is unavailable; retry later' },
  [status.CANCELLED]: { reason: Reason.UNAVAILABLE, message: 'The call was cancelled; retry later' },
  [status.DEADLINE_EXCEEDED]: { reason: Reason.DEADLINE_EXCEEDED, message: 'The request took too long and was abandoned' },
  [status.RESOURCE_EXHAUSTED]: { reason: Reason.LIMIT_EXCEEDED, message: 'The request is larger than the service accepts' },
};

export function toStatus(err: HubError): Partial<StatusObject> {
  const metadata = new Metadata();
  metadata.set(DETAIL_KEY, encodeMessage(commonv1.ErrorDetailSchema, errorDetail(err)));
  return { code: statusOf[err.reason], details: err.message, metadata };
}

/** The error as the detail a status (or one failed call of a group) carries. */
export function errorDetail(err: HubError): commonv1.ErrorDetail {
  return create(commonv1.ErrorDetailSchema, {
    reason: err.reason,
    message: err.message,
    field: err.field,
    retryAfterMs: err.retryAfterMs === undefined ? 0 : Math.min(0xffffffff, Math.max(0, Math.ceil(err.retryAfterMs))),
  });
}

/** The HubError a service chose, from its detail. */
export function fromDetail(detail: commonv1.ErrorDetail, cause?: unknown): HubError {
  return new HubError(detail.reason, detail.message, { field: detail.field, cause, retryAfterMs: detail.retryAfterMs || undefined });
}

export function fromStatus(err: ServiceError): HubError {
  const raw = err.metadata?.get(DETAIL_KEY)[0];
  if (raw instanceof Buffer) {
    try {
      return fromDetail(fromBinary(commonv1.ErrorDetailSchema, raw), err);
    } catch (decodeError) {
      return new HubError(Reason.INTERNAL, 'Internal error', { cause: decodeError });
    }
  }
  const bare = bareStatuses[err.code];
  if (bare) return new HubError(bare.reason, bare.message, { cause: err });
  return new HubError(Reason.INTERNAL, 'Internal error', { cause: err });
}
