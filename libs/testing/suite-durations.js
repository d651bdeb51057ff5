// Updates suite-durations.json (what sequencer.js orders suites by) from a jest --json results
// file, e.g. the .ci/jest-results.json that `bash .ci/run` leaves:
//   node libs/testing/suite-durations.js .ci/jest-results.json
// Suites in the results get their duration there; suites no longer in the tree are dropped.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const file = new URL('./suite-durations.json', import.meta.url);
const results = JSON.parse(readFileSync(resolve(process.argv[2] ?? '.ci/jest-results.json'), 'utf8'));
const durations = JSON.parse(readFileSync(file, 'utf8'));
for (const suite of results.testResults) {
  durations[relative(root, suite.name).split('\\').join('/')] = Math.round((suite.endTime - suite.startTime) / 100) / 10;
}
const kept = Object.keys(durations).filter((path) => existsSync(join(root, path))).sort();
writeFileSync(file, `${JSON.stringify(Object.fromEntries(kept.map((path) => [path, durations[path]])), null, 2)}\n`);
console.log(`${results.testResults.length} suites updated, ${kept.length} listed`);
