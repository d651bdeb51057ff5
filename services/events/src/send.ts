import http from 'node:http';
import https from 'node:https';
import { checkLiteral, guardedLookup, type TargetPolicy } from './ssrf.js';

/** What one HTTP attempt came to. `error` is empty exactly when the endpoint answered 2xx. */
export interface AttemptResult {
  statusCode: number;
  latencyMs: number;
  error: string;
  /** The Retry-After header as sent, when there was one. */
  retryAfter?: string;
}

/** Longest error text kept on an attempt. */
const ERROR_MAX = 300;

/**
 * Posts webhook bodies. Connections go through the SSRF guard's lookup, redirects are not
 * followed (a 3xx is a failed attempt), and the whole attempt (connect, headers) is bounded by
 * `timeoutMs`. Sockets are kept alive per endpoint; each was opened to an approved address.
 */
export class WebhookSender {
  private readonly agents = {
    'http:': new http.Agent({ keepAlive: true, maxSockets: 16 }),
    'https:': new https.Agent({ keepAlive: true, maxSockets: 16 }),
  };
  private readonly lookup;

  constructor(private readonly options: { policy: TargetPolicy; timeoutMs: number }) {
    this.lookup = guardedLookup(options.policy);
  }

  async post(rawUrl: string, headers: Record<string, string>, body: string, signal?: AbortSignal): Promise<AttemptResult> {
    const started = performance.now();
    const latency = () => Math.round(performance.now() - started);
    const fail = (error: string, statusCode = 0, retryAfter?: string): AttemptResult => ({
      statusCode,
      latencyMs: latency(),
      error: error.slice(0, ERROR_MAX),
      ...(retryAfter ? { retryAfter } : {}),
    });
    let url: URL;
    try {
      url = new URL(rawUrl);
      checkLiteral(url, this.options.policy);
    } catch (err) {
      return fail((err as Error).message);
    }
    const timeout = AbortSignal.timeout(this.options.timeoutMs);
    const abort = signal ? AbortSignal.any([signal, timeout]) : timeout;
    const transport = url.protocol === 'https:' ? https : http;
    return new Promise<AttemptResult>((resolve) => {
      const request = transport.request(
        url,
        {
          method: 'POST',
          headers: { ...headers, 'content-length': String(Buffer.byteLength(body)), 'user-agent': 'AgentHub-Webhooks/1' },
          agent: this.agents[url.protocol as 'http:' | 'https:'],
          lookup: this.lookup,
          signal: abort,
        },
        (response) => {
          const statusCode = response.statusCode ?? 0;
          // The body is not used; drain it so the socket can be reused.
          response.resume();
          response.on('error', () => undefined);
          const retryAfter = headerText(response.headers['retry-after']);
          if (statusCode >= 200 && statusCode < 300) resolve({ statusCode, latencyMs: latency(), error: '' });
          else resolve(fail(`HTTP ${statusCode}`, statusCode, retryAfter));
        },
      );
      request.on('error', (err: NodeJS.ErrnoException) => {
        if (timeout.aborted) resolve(fail(`timed out after ${this.options.timeoutMs} ms`));
        else if (signal?.aborted) resolve(fail('aborted: the service is stopping'));
        else resolve(fail(err.code ? `${err.code}: ${err.message}` : err.message));
      });
      request.end(body);
    });
  }

  close(): void {
    this.agents['http:'].destroy();
    this.agents['https:'].destroy();
  }
}

function headerText(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/**
 * Retry-After as a delay in milliseconds from `now`: delta-seconds or an HTTP date; undefined
 * when absent or unreadable.
 */
export function retryAfterMs(value: string | undefined, now: number): number | undefined {
  if (!value) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}
