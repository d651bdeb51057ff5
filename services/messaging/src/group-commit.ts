interface Pending<In, Out> {
  item: In;
  resolve: (out: Out) => void;
  reject: (err: unknown) => void;
}

/**
 * Group commit: items that arrive in one turn of the event loop, or while `maxInFlight`
 * statements are running, are written together by `statement`, up to `maxBatch` per statement, in
 * one round trip and one commit (what lets a durable queue keep up with in-memory servers). A group
 * of sends from the gateway (SendMessages) reaches it in one turn: written at once, its first items
 * would take a statement each and leave the rest to wait for one of them. Alone, an item is written
 * at the end of the turn it came in.
 * Each caller's promise settles after its own item is committed, with the statement's answer for
 * it; when a group's statement fails, its items are written one by one, so one bad item does not
 * fail the others.
 */
export class GroupCommit<In, Out> {
  private readonly queue: Pending<In, Out>[] = [];
  private inFlight = 0;

  /** `statement` writes the items in one statement and answers for each, in their order. */
  constructor(
    private readonly statement: (items: In[]) => Promise<Out[]>,
    private readonly maxBatch = 64,
    private readonly maxInFlight = 2,
  ) {}

  write(item: In): Promise<Out> {
    return new Promise<Out>((resolve, reject) => {
      // An item waiting already has a pump coming: the one this turn ends with, or the one a
      // running statement starts when it commits.
      if (this.queue.length === 0) setImmediate(() => this.pump());
      this.queue.push({ item, resolve, reject });
    });
  }

  private pump(): void {
    while (this.inFlight < this.maxInFlight && this.queue.length) {
      const batch = this.queue.splice(0, this.maxBatch);
      this.inFlight += 1;
      void this.flush(batch).finally(() => {
        this.inFlight -= 1;
        this.pump();
      });
    }
  }

  private async flush(batch: Pending<In, Out>[]): Promise<void> {
    try {
      const answers = await this.statement(batch.map((p) => p.item));
      for (const [i, p] of batch.entries()) p.resolve(answers[i]!);
    } catch (err) {
      const [only] = batch;
      if (batch.length === 1 && only) {
        only.reject(err);
        return;
      }
      await Promise.all(batch.map((p) => this.statement([p.item]).then(([answer]) => p.resolve(answer!), p.reject)));
    }
  }
}
