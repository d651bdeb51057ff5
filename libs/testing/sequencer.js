// Runs the longest suites first. Jest does so from its cache of earlier runs' durations, but a CI
// run on a fresh clone has no cache and falls back to file size, which starts some of the longest
// suites (small files that start whole hubs) last, with the other worker idle meanwhile. Without a
// cached duration, a suite's duration comes from suite-durations.json (seconds, from a CI run's
// .ci/jest-results.json: `node libs/testing/suite-durations.js .ci/jest-results.json`). A suite
// in neither runs first, as jest runs new suites.
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import TestSequencer from '@jest/test-sequencer';

const durations = JSON.parse(readFileSync(new URL('./suite-durations.json', import.meta.url), 'utf8'));

export default class LongestFirst extends TestSequencer {
  time(test) {
    const cached = super.time(test);
    if (cached !== undefined) return cached;
    const seconds = durations[relative(test.context.config.rootDir, test.path).split('\\').join('/')];
    return seconds === undefined ? undefined : seconds * 1000;
  }
}
