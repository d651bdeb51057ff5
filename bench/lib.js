// Helpers shared by the benchmark scripts: backends, JSON-RPC calls and output.

export class UsageError extends Error {}
export class Unreachable extends Error {}

export async function checkRedis(redisUrl) {
  const { createClient } = await import('redis');
  const client = createClient({ url: redisUrl, socket: { connectTimeout: 3000, reconnectStrategy: false } });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.ping();
  } catch (err) {
    throw new Unreachable(`Redis is not reachable at ${redisUrl} (${err?.message || err?.code || err}). Start it, or set BENCH_REDIS_URL.`);
  } finally {
    await client.quit().catch(() => client.disconnect().catch(() => undefined));
  }
}

export async function createDatabase(pg, adminUrl, name) {
  const admin = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 3000 });
  try {
    await admin.connect();
  } catch (err) {
    throw new Unreachable(`PostgreSQL is not reachable at ${adminUrl} (${err?.message || err?.code || err}). Start it, or set BENCH_PG_URL.`);
  }
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

export async function dropDatabase(pg, adminUrl, name) {
  const admin = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 3000 });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  } finally {
    await admin.end();
  }
}

export async function clearRedisPrefix(redisUrl, prefix) {
  const { createClient } = await import('redis');
  const client = createClient({ url: redisUrl, socket: { connectTimeout: 3000, reconnectStrategy: false } });
  client.on('error', () => undefined);
  await client.connect();
  try {
    const keys = [];
    for await (const batch of client.scanIterator({ MATCH: `${prefix}*`, COUNT: 500 })) keys.push(...(Array.isArray(batch) ? batch : [batch]));
    if (keys.length) await client.del(keys);
  } finally {
    await client.quit().catch(() => undefined);
  }
}

/** One JSON-RPC call; `rawBody` is sent as is when given. */
export async function rpc(baseUrl, path, bearer, method, params, rawBody) {
  const response = await fetch(`${baseUrl}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${bearer}` },
    body: rawBody ?? JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  const text = await response.text();
  try {
    return JSON.parse(text);
  } catch {
    return { error: { status: response.status, body: text } };
  }
}

export function round(value, digits) {
  if (value === null || value === undefined || !Number.isFinite(value)) return null;
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

export function fmt(n) {
  return Number(n).toLocaleString('en-US');
}

export function log(line) {
  process.stdout.write(`${line}\n`);
}
