import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // One file at a time: the fault, SIGTERM and bench files load the one shared server
    // and both cores; running them beside each other would test the machine, not the code.
    fileParallelism: false,
    pool: 'forks',
  },
})
