import { defineConfig } from 'vitest/config'
import { BaseSequencer, type TestSpecification } from 'vitest/node'

/**
 * Integration files that run alone, one after the other, after the others: each one stops,
 * stalls or loads the server, or asserts what happens within a time window (a socket timeout,
 * a SIGTERM under load, Redis killed), so a neighbour loading both cores would test the machine
 * instead of the code. Every other integration file runs beside one more (2 workers): each
 * has a database of its own (helpers.ts openDb) and asserts no timing.
 */
const SOLO = (process.env.FWB_SOLO_ORDER ?? 'test/faults.test.ts,test/overtaking.test.ts,test/driver-resends.test.ts,test/sigterm.test.ts,test/cache-bus.test.ts,test/cache-bus-frozen.test.ts,test/cache-bus-slow.test.ts,test/outcome-truth.test.ts').split(',')

/** The solo files in SOLO's order, every run (vitest's default order depends on its cache); the others as vitest sorts them. */
class SoloOrder extends BaseSequencer {
  override async sort (files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (f: TestSpecification): number => SOLO.findIndex(s => f.moduleId.endsWith(s))
    const sorted = await super.sort(files.filter(f => rank(f) < 0))
    return [...sorted, ...files.filter(f => rank(f) >= 0).sort((a, b) => rank(a) - rank(b))]
  }
}

/**
 * The bench's smoke run (test/bench.test.ts: `bench/run.mjs --quick`, every suite once, ~90 s) checks
 * the benchmark's plumbing, not the library: like the package check it is its own command,
 * `npm run check:bench` (FWB_BENCH_SMOKE=1), run by .ci/run and the GitHub workflow, not by npm test.
 */
const BENCH_SMOKE = process.env.FWB_BENCH_SMOKE === '1'
const BENCH = 'test/bench.test.ts'

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    sequence: { sequencer: SoloOrder },
    // this machine has 2 cores (vitest's default would leave one idle)
    maxWorkers: 2,
    projects: [
      // the batching rules against a tiny in-process fake of bulkWrite: no server at all
      // (files in parallel: they share nothing)
      { extends: true, test: { name: 'unit', include: ['test/unit/**/*.test.ts'], fileParallelism: true, sequence: { groupOrder: 0 } } },
      // then the integration files: the parallel ones, then the solo ones
      // the real server is the judge; both projects share one server, probed once (global-setup.ts)
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/**/*.test.ts'],
          exclude: ['test/unit/**', BENCH, ...SOLO],
          globalSetup: ['test/global-setup.ts'],
          fileParallelism: true,
          sequence: { groupOrder: 1 },
        },
      },
      {
        extends: true,
        test: {
          name: 'integration-solo',
          include: SOLO,
          globalSetup: ['test/global-setup.ts'],
          fileParallelism: false,
          sequence: { groupOrder: 2 },
        },
      },
      ...(BENCH_SMOKE ? [{ extends: true as const, test: { name: 'bench', include: [BENCH], globalSetup: ['test/global-setup.ts'], sequence: { groupOrder: 3 } } }] : []),
    ],
  },
})
