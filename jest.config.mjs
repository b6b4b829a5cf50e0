/** Tests run on the compiled output (`npm test` builds first), as native ES modules. */
export default {
  testEnvironment: 'node',
  testMatch: ['<rootDir>/{apps,packages}/*/dist/test/**/*.test.js'],
  transform: {},
  globalSetup: '<rootDir>/packages/core/dist/src/testing/global-setup.js',
  testTimeout: 60_000,
  maxWorkers: 2,
};
