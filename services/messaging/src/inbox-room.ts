import type { DeliveryStore } from './delivery-store.js';

/** How long a replica trusts its own count of a recipient's room before counting again. */
const ROOM_TRUST_MS = 1_000;

/**
 * The queued-deliveries quota without a count on every send: a count of the recipient's
 * undelivered deliveries gives its room, which this replica's sends then use up one by one; it
 * counts again once the room is used up or a second has passed (other replicas' sends, acks).
 * So the quota can be passed by what other replicas queue within that second.
 */
export class InboxRoom {
  private readonly room = new Map<string, { left: number; until: number }>();

  constructor(private readonly store: DeliveryStore, private readonly maxEntries = 10_000) {}

  /** Takes one place in the recipient's inbox; false when it holds `max` deliveries. */
  async take(signal: AbortSignal, recipientAgentId: string, max: number): Promise<boolean> {
    const now = Date.now();
    const known = this.room.get(recipientAgentId);
    if (known && known.until > now && known.left > 0) {
      known.left -= 1;
      return true;
    }
    const queued = await this.store.queuedDeliveries(signal, recipientAgentId, max);
    if (queued >= max) {
      this.room.delete(recipientAgentId);
      return false;
    }
    if (!known && this.room.size >= this.maxEntries) this.room.clear();
    this.room.set(recipientAgentId, { left: max - queued - 1, until: now + ROOM_TRUST_MS });
    return true;
  }
}
