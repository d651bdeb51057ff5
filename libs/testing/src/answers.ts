import type { ServerResponse } from 'node:http';

/**
 * Runs `answer` after `ms`, unless `res` closes first (its caller gave up, or the server dropped
 * the connection): then nothing is answered, and no timer outlives the exchange to hold a jest
 * worker open after its tests are done.
 */
export function answerAfter(res: ServerResponse, ms: number, answer: () => void): void {
  const timer = setTimeout(answer, ms);
  res.once('close', () => clearTimeout(timer));
}
