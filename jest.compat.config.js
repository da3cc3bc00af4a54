/** The compatibility suite (test/compat, #15): packs the library, installs it without npm flags into a
 * CommonJS app on Nest 11 + ioredis 5 and an ES module app on Nest 12 + ioredis 6 (temp dirs, npm
 * registry or cache), and runs two instances of each against a private Redis. It starts no shared
 * topology (its own global setup only tags the run so Ctrl-C still stops its Redis).
 * `npx jest -c jest.compat.config.js` runs it alone; `npm test` runs it after the fault suite. */
const base = require('./jest.config');

module.exports = {
  ...base,
  testMatch: ['<rootDir>/test/compat/**/*.spec.ts'],
  testPathIgnorePatterns: ['/node_modules/'],
  globalSetup: '<rootDir>/test/compat/global-setup.ts',
  globalTeardown: '<rootDir>/test/compat/global-teardown.ts',
  maxWorkers: 1,
  testTimeout: 120000,
};
