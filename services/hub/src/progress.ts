/** Where progress goes: stderr, so stdout stays the result (and `--json` stays parseable). */
export interface ProgressStream {
  write(text: string): unknown;
  isTTY?: boolean;
}

/**
 * Progress of a long command. On a terminal one line is rewritten in place and cleared at the
 * end; elsewhere (a pipe, CI, a log file) each update is a plain line of its own.
 */
export class Progress {
  private shown = false;
  private ticker: NodeJS.Timeout | undefined;

  constructor(private readonly out: ProgressStream) {}

  update(text: string): void {
    if (this.out.isTTY) this.out.write(`\r\u001b[K${text}`);
    else this.out.write(`${text}\n`);
    this.shown = true;
  }

  /**
   * For work the hub does in one call: the elapsed seconds, rewritten each second on a terminal;
   * a single line elsewhere.
   */
  working(text: string): void {
    const started = Date.now();
    this.update(`${text}…`);
    if (!this.out.isTTY) return;
    this.ticker = setInterval(() => this.update(`${text}… ${Math.round((Date.now() - started) / 1000)} s`), 1_000);
    this.ticker.unref();
  }

  /** Ends the display; on a terminal the line is cleared so the result stands alone. */
  done(): void {
    clearInterval(this.ticker);
    if (this.shown && this.out.isTTY) this.out.write('\r\u001b[K');
  }
}
