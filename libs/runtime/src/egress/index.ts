/**
 * The egress guard: the only way the hub calls out to a peer (webhook receivers, push agents,
 * embedding providers). Address policy (global unicast unless HUB_EGRESS_ALLOW_PRIVATE), DNS
 * pinned to checked addresses, no redirects, bounded responses, fixed error messages.
 */
export {
  BlockedAddressError,
  checkTargetUrl,
  egressPolicy,
  guardedLookup,
  hostRefusal,
  refusedClass,
  systemResolver,
  URL_MAX,
  type EgressPolicy,
  type ResolvedAddress,
  type Resolver,
} from './policy.js';
export {
  DEFAULT_MAX_RESPONSE_BYTES,
  EgressClient,
  EgressError,
  statusError,
  type EgressClientOptions,
  type EgressFailure,
  type EgressRequest,
  type EgressResponse,
} from './client.js';
