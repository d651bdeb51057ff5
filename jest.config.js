/** Tests run as ES modules straight from TypeScript sources (swc), against real gRPC, HTTP,
 * PostgreSQL and Redis; see libs/testing for how backends are chosen. */
export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  transform: {
    '^.+\\.ts$': [
      '@swc/jest',
      { jsc: { target: 'es2022', parser: { syntax: 'typescript' } }, module: { type: 'es6' } },
    ],
  },
  moduleNameMapper: {
    '^@agenthub/(proto|runtime|testing|tasks|client)$': '<rootDir>/libs/$1/src/index.ts',
    '^@agenthub/runtime/config$': '<rootDir>/libs/runtime/src/config.ts',
    '^@agenthub/runtime/kafka$': '<rootDir>/libs/runtime/src/bus/kafka-bus.ts',
    '^@agenthub/runtime/redis$': '<rootDir>/libs/runtime/src/kv/redis.ts',
    '^@agenthub/(gateway|identity|workspace|secrets|messaging|events|hub)$': '<rootDir>/services/$1/src/index.ts',
    '^@agenthub/(gateway|identity|workspace|secrets|messaging|events)/main$': '<rootDir>/services/$1/src/main.ts',
    '^(\\.{1,2}/.*)\\.js$': '$1',
  },
  testMatch: ['<rootDir>/libs/*/test/**/*.test.ts', '<rootDir>/services/*/test/**/*.test.ts'],
  globalSetup: '<rootDir>/libs/testing/global-setup.js',
  // Longest suites first, from committed durations when jest has no cache (CI on a fresh clone).
  testSequencer: '<rootDir>/libs/testing/sequencer.js',
  // A hook that starts a whole embedded hub opens one PostgreSQL (PGlite) per service: about ten
  // seconds on an idle 2-core machine, several times that on a busy one.
  testTimeout: 180000,
  maxWorkers: 2,
  // A worker that opened many PGlite databases takes more than jest's default half second to be
  // gone after its last test: its event loop is empty at once, but the process's teardown frees
  // each database's wasm memory (about 240 MiB each; measured 0.5 s for 20 closed databases and
  // 1.3 s for 60 on an idle machine). Jest then killed it and printed "A worker process has
  // failed to exit gracefully", which is how a leaked handle shows too.
  workerGracefulExitTimeout: 5000,
};
