import type { GenService, GenServiceMethods } from '@bufbuild/protobuf/codegenv2';
import { eventsv1, identityv1, messagingv1, secretsv1, workspacev1 } from '@agenthub/proto';

/**
 * The services the gateway forwards to, by the name used in configuration (`<NAME>_ADDR`),
 * readiness checks and the hub's wiring. A new service is one line here.
 */
export const UPSTREAMS = {
  identity: identityv1.IdentityService,
  workspace: workspacev1.WorkspaceService,
  secrets: secretsv1.SecretsService,
  messaging: messagingv1.MessagingService,
  events: eventsv1.EventsService,
} as const satisfies Record<string, GenService<GenServiceMethods>>;

export type UpstreamName = keyof typeof UPSTREAMS;

/** `host:port` of every upstream. */
export type UpstreamAddresses = Record<UpstreamName, string>;
