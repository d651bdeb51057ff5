import { EgressClient, EgressError, type EgressPolicy } from '@agenthub/runtime';

/** What one HTTP attempt came to. `error` is empty exactly when the endpoint answered 2xx. */
export interface AttemptResult {
  statusCode: number;
  latencyMs: number;
  error: string;
  /** The Retry-After header as sent, when there was one. */
  retryAfter?: string;
}

/**
 * Posts webhook bodies through the hub's egress guard: connections only to addresses the policy
 * approved, redirects not followed (a 3xx is a failed attempt), the receiver's body never read,
 * and the whole attempt (connect, headers) bounded by `timeoutMs`. An attempt's error is the
 * guard's fixed text, never the receiver's words.
 */
export class WebhookSender {
  private readonly client: EgressClient;

  constructor(options: { policy: EgressPolicy; timeoutMs: number }) {
    this.client = new EgressClient({ policy: options.policy, timeoutMs: options.timeoutMs, userAgent: 'AgentHub-Webhooks/1' });
  }

  async post(url: string, headers: Record<string, string>, body: string, signal?: AbortSignal): Promise<AttemptResult> {
    const started = performance.now();
    const latency = () => Math.round(performance.now() - started);
    try {
      const answer = await this.client.request(url, { method: 'POST', headers, body, signal, readBody: false });
      if (answer.status >= 200 && answer.status < 300) return { statusCode: answer.status, latencyMs: latency(), error: '' };
      const retryAfter = headerText(answer.headers['retry-after']);
      return { statusCode: answer.status, latencyMs: latency(), error: `HTTP ${answer.status}`, ...(retryAfter ? { retryAfter } : {}) };
    } catch (err) {
      if (!(err instanceof EgressError)) throw err;
      return { statusCode: err.status, latencyMs: latency(), error: err.message };
    }
  }

  close(): void {
    this.client.close();
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
