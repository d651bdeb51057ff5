// Writes docs/openrpc.json from the gateway's method tables and params schemas (after a build).
import { writeFile } from 'node:fs/promises';
import { openRpcDocument } from '@agenthub/gateway';

await writeFile(new URL('../docs/openrpc.json', import.meta.url), `${JSON.stringify(openRpcDocument(), null, 2)}\n`);
