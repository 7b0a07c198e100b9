import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // One file at a time: the fault, SIGTERM and bench files load the one shared server
    // and both cores; running them beside each other would test the machine, not the code.
    fileParallelism: false,
    pool: 'forks',
    projects: [
      // the batching rules against a tiny in-process fake of bulkWrite: no server at all
      // (files in parallel: they share nothing)
      { extends: true, test: { name: 'unit', include: ['test/unit/**/*.test.ts'], fileParallelism: true } },
      // the real server is the judge
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/**/*.test.ts'],
          exclude: ['test/unit/**'],
          globalSetup: ['test/global-setup.ts'],
        },
      },
    ],
  },
})
