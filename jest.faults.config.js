/** The fault suite (test/faults): each file kills, freezes or restarts real Redis servers under 8 racing
 * processes and measures how long a hot key stays unavailable. One file at a time, so the measured
 * outages are the library's and not the other files' load on a 2-core machine.
 * `npx jest -c jest.faults.config.js [file]` runs it alone; `npm test` runs it after the main suite. */
const base = require('./jest.config');

module.exports = {
  ...base,
  testMatch: ['<rootDir>/test/faults/**/*.spec.ts'],
  testPathIgnorePatterns: ['/node_modules/'],
  maxWorkers: 1,
  testTimeout: 120000,
};
