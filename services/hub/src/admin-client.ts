/** A JSON-RPC client of the hub's operator endpoint (`POST /admin`). */
export class AdminClient {
  private nextId = 1;

  constructor(private readonly baseUrl: string, private readonly token: string) {}

  async call<T = Record<string, unknown>>(method: string, params: Record<string, unknown> = {}): Promise<T> {
    let response: Response;
    try {
      response = await fetch(new URL('/admin', this.baseUrl), {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${this.token}` },
        body: JSON.stringify({ jsonrpc: '2.0', id: this.nextId++, method, params }),
        signal: AbortSignal.timeout(30_000),
      });
    } catch (err) {
      throw new AdminError(`Cannot reach the hub at ${this.baseUrl} (${(err as Error).message}). Is it running?`);
    }
    const body = (await response.json().catch(() => undefined)) as
      | { result?: T; error?: { code: number; message: string } }
      | undefined;
    if (response.status === 401) throw new AdminError('The hub refused the operator token (HUB_ADMIN_TOKEN or .agenthub/admin-token).');
    if (!body) throw new AdminError(`The hub answered HTTP ${response.status} without a JSON body`);
    if (body.error) throw new AdminError(`${body.error.message} (code ${body.error.code})`);
    return body.result as T;
  }
}

export class AdminError extends Error {
  override readonly name = 'AdminError';
}
