#!/usr/bin/env node
// A committed entry so npm can link `agenthub` at install time, before the build makes dist/.
try {
  await import('../dist/cli.js');
} catch (err) {
  if (err?.code === 'ERR_MODULE_NOT_FOUND' && String(err.message).includes('dist/cli.js')) {
    process.stderr.write('agenthub: not built yet; run `npm run build` (or `npm start`) first.\n');
    process.exit(1);
  }
  throw err;
}
