/** Unit and integration tests in one run; integration tests talk to real redis-server processes
 * that test/global-setup.ts starts (and test/global-teardown.ts stops, by pid). The fault suite
 * (test/faults) runs after it, one file at a time: see jest.faults.config.js. */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.spec.ts'],
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/faults/', '<rootDir>/test/compat/'],
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] },
  // The package's own name, as the sample app imports it: the sources (tsconfig.json "paths").
  moduleNameMapper: {
    '^nestjs-redis-lock$': '<rootDir>/lib/index.ts',
    '^nestjs-redis-lock/health$': '<rootDir>/lib/health/index.ts',
    '^nestjs-redis-lock/board$': '<rootDir>/lib/board/index.ts',
  },
  globalSetup: '<rootDir>/test/global-setup.ts',
  globalTeardown: '<rootDir>/test/global-teardown.ts',
  // Most of a file's time is spent waiting on Redis, timers and child processes (about a third of two
  // cores busy with two workers), so four share two cores well; the timing-sensitive faults run alone.
  maxWorkers: 4,
  testTimeout: 60000,
};
