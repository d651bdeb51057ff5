// A connected agent in a dozen lines: it answers every message with its text, reversed.
//
//   AGENTHUB_URL=http://127.0.0.1:8080 AGENTHUB_API_KEY=ahk_… node examples/echo-agent.mjs
//
// Register it first with `npx agenthub agents create --tenant acme --name echo --json` (no
// --endpoint: it connects to the hub). Stop it with Ctrl-C.
import { HubClient } from '@agenthub/client';

const client = new HubClient({ url: process.env.AGENTHUB_URL ?? 'http://127.0.0.1:8080', apiKey: process.env.AGENTHUB_API_KEY });
const stop = new AbortController();
process.once('SIGINT', () => stop.abort());
process.once('SIGTERM', () => stop.abort());

console.log('echo agent: serving');
await client.serve(
  async ({ text, from }) => {
    if (!text) return { inputRequired: 'Send me some text to echo.' };
    return { text: `${[...text].reverse().join('')} (for ${from})` };
  },
  { signal: stop.signal },
);
console.log('echo agent: stopped');
