import pg from 'pg';

type Handler = (payload: string) => void;

/**
 * The one connection a PostgresDb LISTENs on, for every channel its callers listen to (a pool
 * connection cannot: LISTEN belongs to a session). Opened by the first listen, closed with the
 * last; when the server or the network drops it, it is opened again after `retryMs`, and again
 * until that works, with every channel listened to anew.
 */
export class PgListener {
  private readonly handlers = new Map<string, Set<Handler>>();
  private connecting: Promise<pg.Client> | undefined;
  private current: pg.Client | undefined;
  private retry: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly config: pg.ClientConfig,
    private readonly retryMs = 1_000,
  ) {}

  /** `channel` must already be a plain identifier. */
  async listen(channel: string, onNotify: Handler): Promise<() => Promise<void>> {
    if (this.closed) throw new Error('The database handle is closed');
    // Its own function, so the same callback listening twice is two subscriptions.
    const handler: Handler = (payload) => onNotify(payload);
    let handlers = this.handlers.get(channel);
    if (!handlers) this.handlers.set(channel, (handlers = new Set()));
    handlers.add(handler);
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
    await this.disconnect();
  }

  private async remove(channel: string, handler: Handler): Promise<void> {
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
      for (const handler of this.handlers.get(n.channel) ?? []) handler(n.payload ?? '');
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
