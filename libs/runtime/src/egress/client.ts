import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { HubError, Reason } from '../errors.js';
import { BlockedAddressError, guardedLookup, hostOf, refusedClass, type EgressPolicy } from './policy.js';
import { injectTraceparent } from '../tracing.js';

/** Why an outbound call failed; the message of an EgressError is fixed per kind, never the peer's words. */
export type EgressFailure = 'refused-address' | 'redirect' | 'status' | 'too-large' | 'unreachable' | 'timeout' | 'aborted' | 'bad-url';

/**
 * A failed outbound call: UNAVAILABLE with a fixed message and, when the peer answered, its
 * HTTP status. No byte of the peer's response body is kept: not in the message, not in `cause`.
 */
export class EgressError extends HubError {
  constructor(
    readonly failure: EgressFailure,
    message: string,
    /** The peer's HTTP status, 0 when it gave none. */
    readonly status = 0,
    /** The Retry-After header of a refusal, as sent. */
    readonly retryAfter?: string,
  ) {
    super(Reason.UNAVAILABLE, message);
  }
}

export interface EgressRequest {
  method?: string;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  /** The caller's deadline or shutdown; the client's own timeout applies as well. */
  signal?: AbortSignal;
  /** Overrides the client's response size cap for this call. */
  maxResponseBytes?: number;
  /** False: resolve at the response headers and discard any body (a webhook's receiver has nothing to say). */
  readBody?: boolean;
}

export interface EgressResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** The body of a 2xx answer, at most the cap; empty for any other status (it is never read). */
  body: Buffer;
}

export interface EgressClientOptions {
  policy: EgressPolicy;
  /** Bound on one call (connect, headers, body), on top of the caller's signal. */
  timeoutMs: number;
  /** Largest 2xx response body read; a longer one fails the call (`too-large`). Default 1 MiB. */
  maxResponseBytes?: number;
  userAgent?: string;
  /** Kept-alive sockets per origin. */
  maxSockets?: number;
}

export const DEFAULT_MAX_RESPONSE_BYTES = 1024 * 1024;

/**
 * The one way the hub calls out (webhooks, push agents, embedding providers). Every connection
 * goes to an address the policy approved (the host is resolved by the policy's resolver and each
 * address checked; IP literals are checked before connecting), redirects are never followed (a
 * 3xx fails the call with its status), a 2xx body is read up to a cap, a non-2xx body is never
 * read, and each call is bounded by a timeout and the caller's signal. TLS keeps verifying the
 * URL's host name: only the address lookup is replaced.
 */
export class EgressClient {
  private readonly agents: Record<'http:' | 'https:', http.Agent>;
  private readonly lookup;
  private readonly maxResponseBytes: number;

  constructor(private readonly options: EgressClientOptions) {
    const maxSockets = options.maxSockets ?? 16;
    this.agents = {
      'http:': new http.Agent({ keepAlive: true, maxSockets }),
      'https:': new https.Agent({ keepAlive: true, maxSockets }),
    };
    this.lookup = guardedLookup(options.policy);
    this.maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  }

  get policy(): EgressPolicy {
    return this.options.policy;
  }

  /**
   * One call. Resolves with the status for any answer that is not a redirect (the body only for
   * 2xx); rejects with an EgressError when no usable answer came.
   */
  request(rawUrl: string, init: EgressRequest = {}): Promise<EgressResponse> {
    let url: URL;
    try {
      url = new URL(rawUrl);
    } catch {
      return Promise.reject(new EgressError('bad-url', 'The endpoint URL is not a valid URL'));
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      return Promise.reject(new EgressError('bad-url', 'The endpoint URL must use http or https'));
    }
    const host = hostOf(url);
    if (!this.options.policy.allowPrivate && isIP(host)) {
      // Node does not call `lookup` for IP literals.
      const refused = refusedClass(host);
      if (refused) return Promise.reject(new EgressError('refused-address', `The endpoint's address is refused: the URL names a ${refused} address`));
    }
    const timeout = AbortSignal.timeout(this.options.timeoutMs);
    const signal = init.signal ? AbortSignal.any([init.signal, timeout]) : timeout;
    const cap = init.maxResponseBytes ?? this.maxResponseBytes;
    const transport = url.protocol === 'https:' ? https : http;
    const body = init.body === undefined ? undefined : typeof init.body === 'string' ? Buffer.from(init.body) : init.body;
    const headers: Record<string, string> = { ...init.headers };
    if (this.options.userAgent && !Object.keys(headers).some((h) => h.toLowerCase() === 'user-agent')) headers['user-agent'] = this.options.userAgent;
    if (body) headers['content-length'] = String(body.byteLength);
    // The receiver (webhook endpoint, push agent) may continue the trace this call belongs to.
    injectTraceparent((name, value) => {
      headers[name] = value;
    });

    return new Promise<EgressResponse>((resolve, reject) => {
      let settled = false;
      const fail = (err: EgressError) => {
        if (settled) return;
        settled = true;
        request.destroy();
        reject(err);
      };
      const failFromCause = (err: NodeJS.ErrnoException) => {
        if (timeout.aborted) fail(new EgressError('timeout', `The endpoint did not answer within ${this.options.timeoutMs} ms`));
        else if (signal.aborted) fail(new EgressError('aborted', 'The call was aborted'));
        else if (err instanceof BlockedAddressError) fail(new EgressError('refused-address', `The endpoint's address is refused: ${err.message}`));
        else fail(new EgressError('unreachable', err.code ? `The endpoint could not be reached (${err.code})` : 'The endpoint could not be reached'));
      };
      const request = transport.request(
        url,
        { method: init.method ?? 'GET', headers, agent: this.agents[url.protocol as 'http:' | 'https:'], lookup: this.lookup, signal },
        (response) => {
          const status = response.statusCode ?? 0;
          response.on('error', (err) => failFromCause(err));
          if (status < 200 || status >= 300) {
            // Never read: a non-2xx body is the peer's text, which must not travel further.
            response.resume();
            if (status >= 300 && status < 400) {
              fail(new EgressError('redirect', `The endpoint answered HTTP ${status} (a redirect, not followed)`, status));
              return;
            }
            settled = true;
            resolve({ status, headers: response.headers, body: Buffer.alloc(0) });
            return;
          }
          if (init.readBody === false) {
            response.resume();
            settled = true;
            resolve({ status, headers: response.headers, body: Buffer.alloc(0) });
            return;
          }
          const declared = Number(response.headers['content-length']);
          if (Number.isFinite(declared) && declared > cap) {
            fail(new EgressError('too-large', `The endpoint's answer exceeds ${cap} bytes`, status));
            return;
          }
          const chunks: Buffer[] = [];
          let size = 0;
          response.on('data', (chunk: Buffer) => {
            size += chunk.byteLength;
            if (size > cap) fail(new EgressError('too-large', `The endpoint's answer exceeds ${cap} bytes`, status));
            else chunks.push(chunk);
          });
          response.on('end', () => {
            if (settled) return;
            settled = true;
            resolve({ status, headers: response.headers, body: Buffer.concat(chunks, size) });
          });
        },
      );
      request.on('error', failFromCause);
      request.end(body);
    });
  }

  /**
   * A `fetch` over `request` for libraries that take one (the A2A client): the same guard, and a
   * non-2xx answer rejects with an EgressError carrying only its status, so no library reads the
   * peer's error body into a message.
   */
  readonly fetch: typeof fetch = async (input, init) => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.toString() : input.url;
    const headers: Record<string, string> = {};
    new Headers(init?.headers).forEach((value, key) => {
      headers[key] = value;
    });
    const body = init?.body;
    if (body !== undefined && body !== null && typeof body !== 'string' && !(body instanceof Uint8Array)) {
      throw new TypeError('The egress fetch sends string or byte bodies only');
    }
    const answer = await this.request(url, { method: init?.method ?? 'GET', headers, body: body ?? undefined, signal: init?.signal ?? undefined });
    if (answer.status < 200 || answer.status >= 300) throw statusError(answer);
    const out = new Headers();
    for (const [key, value] of Object.entries(answer.headers)) {
      if (value === undefined) continue;
      for (const v of Array.isArray(value) ? value : [value]) out.append(key, v);
    }
    const empty = answer.status === 204 || answer.status === 205;
    return new Response(empty ? null : answer.body, { status: answer.status, headers: out });
  };

  close(): void {
    this.agents['http:'].destroy();
    this.agents['https:'].destroy();
  }
}

/** The fixed error for an answer that is not 2xx. */
export function statusError(answer: Pick<EgressResponse, 'status' | 'headers'>): EgressError {
  const retryAfter = answer.headers['retry-after'];
  return new EgressError('status', `The endpoint answered HTTP ${answer.status}`, answer.status, Array.isArray(retryAfter) ? retryAfter[0] : retryAfter);
}
