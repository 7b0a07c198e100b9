import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // the server is shared; two files at a time is what 2 cores can carry
    maxWorkers: 2,
    pool: 'forks',
  },
})
