import pg from 'pg';

type Handler = (payload: string) => void;

/**
 * A PostgresDb's notifications. Listening takes one connection of its own (a pool connection
 * cannot: LISTEN belongs to a session), opened by the first listen and closed with the last; when
 * the server or the network drops it, it is opened again after `retryMs`, and again until that
 * works, with every channel listened to anew. Notifying reaches this handle's listeners at once
 * and other sessions' through `send` (a pg_notify on the pool, outside any transaction), at most
 * one at a time per channel and payload: repeats meanwhile go as one more after it. What comes
 * back from the server of its own sending (`ownBackend`) is not delivered a second time. While a
 * listener that stands in for other processes' listens to a channel, nothing is sent for it.
 */
export class PgNotifications {
  private readonly handlers = new Map<string, Set<Handler>>();
  private readonly standIns = new Map<string, Set<Handler>>();
  private readonly sending = new Set<string>();
  private readonly again = new Set<string>();
  private connecting: Promise<pg.Client> | undefined;
  private current: pg.Client | undefined;
  private retry: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly config: pg.ClientConfig,
    private readonly send: (channel: string, payload: string) => Promise<unknown>,
    private readonly ownBackend: (pid: number) => boolean,
    private readonly retryMs = 1_000,
  ) {}

  /** `channel` must already be a plain identifier; called after the notifying transaction committed. */
  notify(channel: string, payload: string): void {
    if (this.closed) return;
    this.deliver(channel, payload);
    if (!this.standIns.get(channel)?.size) this.sendOnce(channel, payload);
  }

  /** `channel` must already be a plain identifier. */
  async listen(channel: string, onNotify: Handler, standsInForOthers = false): Promise<() => Promise<void>> {
    if (this.closed) throw new Error('The database handle is closed');
    // Its own function, so the same callback listening twice is two subscriptions.
    const handler: Handler = (payload) => onNotify(payload);
    let handlers = this.handlers.get(channel);
    if (!handlers) this.handlers.set(channel, (handlers = new Set()));
    handlers.add(handler);
    if (standsInForOthers) {
      let standIns = this.standIns.get(channel);
      if (!standIns) this.standIns.set(channel, (standIns = new Set()));
      standIns.add(handler);
    }
    try {
      const client = await this.connection();
      await client.query(`LISTEN ${channel}`);
    } catch (err) {
      await this.remove(channel, handler);
      throw err;
    }
    return () => this.remove(channel, handler);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    this.handlers.clear();
    this.standIns.clear();
    await this.disconnect();
  }

  private async remove(channel: string, handler: Handler): Promise<void> {
    this.standIns.get(channel)?.delete(handler);
    const handlers = this.handlers.get(channel);
    if (!handlers?.delete(handler) || handlers.size > 0) return;
    this.handlers.delete(channel);
    if (this.handlers.size === 0) {
      clearTimeout(this.retry);
      await this.disconnect();
    } else {
      await this.current?.query(`UNLISTEN ${channel}`).catch(() => undefined);
    }
  }

  private connection(): Promise<pg.Client> {
    this.connecting ??= this.connect().catch((err: unknown) => {
      this.connecting = undefined;
      throw err;
    });
    return this.connecting;
  }

  private async connect(): Promise<pg.Client> {
    const client = new pg.Client(this.config);
    client.on('notification', (n) => {
      if (!this.ownBackend(n.processId)) this.deliver(n.channel, n.payload ?? '');
    });
    client.on('error', () => this.lost(client));
    client.on('end', () => this.lost(client));
    try {
      await client.connect();
      for (const channel of this.handlers.keys()) await client.query(`LISTEN ${channel}`);
    } catch (err) {
      await client.end().catch(() => undefined);
      throw err;
    }
    this.current = client;
    return client;
  }

  private sendOnce(channel: string, payload: string): void {
    const key = `${channel}\u0000${payload}`;
    if (this.sending.has(key)) {
      this.again.add(key);
      return;
    }
    this.sending.add(key);
    // A lost one only delays listeners elsewhere until their poll.
    void this.send(channel, payload)
      .catch(() => undefined)
      .finally(() => {
        this.sending.delete(key);
        if (this.again.delete(key) && !this.closed) this.sendOnce(channel, payload);
      });
  }

  private deliver(channel: string, payload: string): void {
    for (const handler of this.handlers.get(channel) ?? []) handler(payload);
  }

  private lost(client: pg.Client): void {
    if (this.current !== client) return;
    this.current = undefined;
    this.connecting = undefined;
    void client.end().catch(() => undefined);
    this.reconnectLater();
  }

  private reconnectLater(): void {
    if (this.closed || this.handlers.size === 0) return;
    clearTimeout(this.retry);
    this.retry = setTimeout(() => {
      this.connection().catch(() => this.reconnectLater());
    }, this.retryMs);
    this.retry.unref();
  }

  private async disconnect(): Promise<void> {
    const connecting = this.connecting;
    this.connecting = undefined;
    this.current = undefined;
    const client = await connecting?.catch(() => undefined);
    await client?.end().catch(() => undefined);
  }
}
