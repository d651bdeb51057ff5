import { chmod, lstat, mkdir, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from './logger.js';

/**
 * The embedded data directory holds PGlite clusters (webhook secrets, memories, messages), the
 * event log, the operator token and the KEK file: readable by the hub's user only. A directory
 * of mode 0700 keeps everything below it from other local users whatever the files' own modes.
 */
export async function ensurePrivateDir(dir: string, log: Logger): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await restrict(dir, 0o700, log, 'data directory');
}

/** A file of key material (operator token, KEK): mode 0600, repaired with a warning if wider. */
export async function ensurePrivateFile(path: string, log: Logger, what: string): Promise<void> {
  await restrict(path, 0o600, log, what);
}

async function restrict(path: string, mode: number, log: Logger, what: string): Promise<void> {
  const was = (await stat(path)).mode & 0o777;
  if (!(was & 0o077)) return;
  await chmod(path, mode);
  log.warn({ path, was: `0${was.toString(8)}`, now: `0${mode.toString(8)}` }, `${what} was open to other local users; restricted it to its owner`);
}

/**
 * Takes group and other bits off everything under `dir`. PGlite writes its cluster files 0666
 * whatever the umask (they come out of its template archive and its WASM file system), so a
 * cluster is closed after it opens; files it adds later follow the umask of `serve` (077).
 */
export async function restrictTree(dir: string): Promise<void> {
  const info = await lstat(dir);
  // A link's target is not ours to change.
  if (info.isSymbolicLink()) return;
  if (info.mode & 0o077) await chmod(dir, (info.mode & 0o700) | (info.isDirectory() ? 0o700 : 0));
  if (!info.isDirectory()) return;
  for (const entry of await readdir(dir)) await restrictTree(join(dir, entry));
}
