/**
 * The delivery slots of one replica's push worker: each call to a push agent (a forward, a
 * follow-up, a cancel) holds one. They are bounded in all, per tenant and per agent, so slow or
 * tarpit agents of one tenant hold at most that tenant's share and the other tenants' deliveries
 * keep their slots (as the events service shares webhook slots between workspaces).
 */
export interface SlotLimits {
  total: number;
  perTenant: number;
  perAgent: number;
}

export class PushSlots {
  private held = 0;
  private readonly tenants = new Map<string, number>();
  private readonly agents = new Map<string, number>();

  constructor(private readonly limits: SlotLimits) {}

  /** Slots no one holds. */
  free(): number {
    return this.limits.total - this.held;
  }

  /** How many more calls to `agentId` (of `tenantId`) may start now. */
  room(tenantId: string, agentId: string): number {
    return Math.max(
      0,
      Math.min(this.free(), this.limits.perTenant - (this.tenants.get(tenantId) ?? 0), this.limits.perAgent - (this.agents.get(agentId) ?? 0)),
    );
  }

  take(tenantId: string, agentId: string): void {
    this.held += 1;
    this.tenants.set(tenantId, (this.tenants.get(tenantId) ?? 0) + 1);
    this.agents.set(agentId, (this.agents.get(agentId) ?? 0) + 1);
  }

  give(tenantId: string, agentId: string): void {
    this.held -= 1;
    drop(this.tenants, tenantId);
    drop(this.agents, agentId);
  }

  /** Tenants holding their share: their agents are not claimed until a slot of theirs frees. */
  busyTenants(): string[] {
    return [...this.tenants].filter(([, n]) => n >= this.limits.perTenant).map(([id]) => id);
  }

  /** Agents holding their share. */
  busyAgents(): string[] {
    return [...this.agents].filter(([, n]) => n >= this.limits.perAgent).map(([id]) => id);
  }
}

function drop(counts: Map<string, number>, key: string): void {
  const left = (counts.get(key) ?? 1) - 1;
  if (left > 0) counts.set(key, left);
  else counts.delete(key);
}
