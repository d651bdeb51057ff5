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
    '^@agenthub/(proto|runtime|testing)$': '<rootDir>/libs/$1/src/index.ts',
    '^@agenthub/(gateway|identity|workspace|secrets|hub)$': '<rootDir>/services/$1/src/index.ts',
    '^@agenthub/(gateway|identity|workspace|secrets)/main$': '<rootDir>/services/$1/src/main.ts',
    '^(\\.{1,2}/.*)\\.js$': '$1',
  },
  testMatch: ['<rootDir>/libs/*/test/**/*.test.ts', '<rootDir>/services/*/test/**/*.test.ts'],
  globalSetup: '<rootDir>/libs/testing/global-setup.js',
  // Starting a hub creates embedded PostgreSQL instances: seconds when idle, more on a busy machine.
  testTimeout: 60000,
  maxWorkers: 2,
};
