/**
 * Which calls wait by design: a blocking send waits up to a minute for the task to settle, a
 * long-poll up to `wait_ms`. Their time says how long agents took, not how fast the hub is, so it
 * is recorded apart (agenthub_jsonrpc_wait_seconds) from ordinary call latency; streams are timed
 * apart by the HTTP app when they end.
 */
type Params = Record<string, unknown>;

const configuration = (params: Params): Params =>
  params.configuration !== null && typeof params.configuration === 'object' ? (params.configuration as Params) : {};

/** The interface's dialect: blocking only when asked; a poll waits when `wait_ms` > 0. */
export function hubWaits(method: string, params: Params): boolean {
  if (method === 'SendMessage') return configuration(params).blocking === true;
  if (method === 'x-hub/inbox.poll') return typeof params.wait_ms === 'number' && params.wait_ms > 0;
  return false;
}

/** Strict A2A 1.0: a send blocks unless `returnImmediately`. */
export function a2aWaits(method: string, params: Params): boolean {
  return method === 'SendMessage' && configuration(params).returnImmediately !== true;
}
