import type { ServerResponse } from 'node:http';
import { HubError, type Logger } from '@agenthub/runtime';
import { RpcCode } from './errors.js';
import type { OpenStream } from './jsonrpc.js';

/** A comment line this often keeps idle streams alive through proxies that drop quiet connections. */
const HEARTBEAT_MS = 15_000;

/**
 * Writes a streaming call as Server-Sent Events: one JSON-RPC response object per `data:` line
 * (all with the request's id), each with the `id:` a client can resume after. A failure after the
 * first event becomes a final error response on the stream.
 */
export async function writeSse(res: ServerResponse, stream: OpenStream, signal: AbortSignal, log: Logger): Promise<void> {
  res.writeHead(200, {
    'Content-Type': 'text/event-stream; charset=utf-8',
    'Cache-Control': 'no-cache, no-transform',
    Connection: 'keep-alive',
    'X-Accel-Buffering': 'no',
  });
  res.flushHeaders();
  const heartbeat = setInterval(() => res.write(': keep-alive\n\n'), HEARTBEAT_MS);
  const send = async (chunk: string) => {
    if (!res.write(chunk) && !signal.aborted) {
      await new Promise<void>((resolve) => {
        res.once('drain', resolve);
        signal.addEventListener('abort', () => resolve(), { once: true });
      });
    }
  };
  try {
    for await (const event of stream.events) {
      if (signal.aborted) break;
      const body = JSON.stringify({ jsonrpc: '2.0', id: stream.id, result: event.result });
      await send(`${event.id !== undefined ? `id: ${event.id}\n` : ''}data: ${body}\n\n`);
    }
  } catch (err) {
    if (!signal.aborted) {
      const error = stream.failure(err);
      // Every internal error is logged with its cause (see jsonrpc.ts).
      if (error.code === RpcCode.INTERNAL_ERROR) log.error({ err }, 'stream failed');
      await send(`data: ${JSON.stringify({ jsonrpc: '2.0', id: stream.id, error })}\n\n`);
    }
  } finally {
    clearInterval(heartbeat);
    res.end();
  }
}
