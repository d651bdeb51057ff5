import type { identityv1 } from '@agenthub/proto';
import type { CallContext } from '@agenthub/runtime';
import type { IdentityClient } from './env.js';

/** How long a recipient's record is kept (its endpoint, tenant, output modes) before it is asked again. */
export const RECIPIENT_TTL_MS = 5_000;

/**
 * Recipient agents as identity knows them, kept for a few seconds: every SendMessage needs its
 * recipient's tenant, output modes and endpoint, which change rarely, and the lookup was a gRPC
 * call plus a query per send. Unknown agents are not remembered, so a new agent is reachable at
 * once; grants are never cached (revocation holds on the very next call).
 */
export class Recipients {
  private readonly known = new Map<string, { agent: identityv1.Agent; until: number }>();

  constructor(
    private readonly identity: IdentityClient,
    private readonly ttlMs = RECIPIENT_TTL_MS,
    private readonly maxEntries = 10_000,
  ) {}

  async get(agentId: string, ctx: CallContext): Promise<identityv1.Agent | undefined> {
    const now = Date.now();
    const hit = this.known.get(agentId);
    if (hit && hit.until > now) return hit.agent;
    const { agent } = await this.identity.getAgent({ agentId }, { parent: ctx });
    if (agent) {
      if (this.known.size >= this.maxEntries) this.known.delete(this.known.keys().next().value!);
      this.known.delete(agentId);
      this.known.set(agentId, { agent, until: now + this.ttlMs });
    }
    return agent;
  }
}
