import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ensurePrivateFile, type Logger } from '@agenthub/runtime';

export const ADMIN_TOKEN_FILE = 'admin-token';

/**
 * The embedded hub's operator token: generated on first start and kept in the data directory,
 * readable by its owner only, where the `agenthub` command finds it.
 */
export async function loadOrCreateAdminToken(dataDir: string, log: Logger): Promise<{ token: string; created: boolean }> {
  const path = join(dataDir, ADMIN_TOKEN_FILE);
  const existing = await readAdminToken(dataDir);
  if (existing) {
    // A token file any local user could read hands them the whole hub.
    await ensurePrivateFile(path, log, 'operator token file');
    return { token: existing, created: false };
  }
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const token = `aht_${randomBytes(32).toString('base64url')}`;
  // 'wx' fails if another process wrote the file first; then its token wins.
  try {
    await writeFile(path, `${token}\n`, { mode: 0o600, flag: 'wx' });
    return { token, created: true };
  } catch (err) {
    const raced = await readAdminToken(dataDir);
    if (raced) return { token: raced, created: false };
    throw err;
  }
}

export async function readAdminToken(dataDir: string): Promise<string | undefined> {
  try {
    const token = (await readFile(join(dataDir, ADMIN_TOKEN_FILE), 'utf8')).trim();
    return token || undefined;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}
