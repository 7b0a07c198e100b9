import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { describe, expect, inject, it } from 'vitest'

const run = promisify(execFile)
const root = fileURLToPath(new URL('..', import.meta.url))
const SUITES = ['raw', 'overhead', 'apiPath', 'http', 'cpuAccount', 'loadCurve', 'login', 'loginDetached', 'coalescing', 'cacheScale', 'cacheBus', 'hotPath', 'scaleDispatch', 'scaleCache', 'overload'] as const
/** suites that count no database commands: the API path (no command monitoring, it costs the driver CPU), a CPU account of HTTP routes, and the scale suites on a stub Db */
const NO_COMMAND_COUNT = new Set<string>(['apiPath', 'cpuAccount', 'scaleDispatch', 'scaleCache'])

interface Row { name: string, rate: unknown, dbCommandsPer1kWrites: unknown }
interface OverloadRow { name: string, part: string, limit: number | null, adaptive: boolean, outcomes: Record<string, number>, lost: number, duplicated: number, phantom: number }
interface Report {
  mode: string
  machine: { cpus: unknown, node: unknown, server: { source: unknown, version: unknown } }
  suites: Record<string, { results: Row[], ratios: Record<string, unknown> }>
  targets: Array<{ target: string, met: unknown }>
}

describe('bench/run.mjs --quick', () => {
  // npm run check:bench (FWB_BENCH_SMOKE=1; not part of npm test): it checks the bench's plumbing; FWB_SKIP_BENCH_SMOKE=1 skips it
  it.skipIf(process.env.FWB_SKIP_BENCH_SMOKE === '1')('writes every suite with numeric results, without touching bench/results [FWB_SKIP_BENCH_SMOKE: run on another engine]', async () => {
    if (!existsSync(join(root, 'dist/index.js'))) await run('npm', ['run', 'build'], { cwd: root })
    const out = await mkdtemp(join(tmpdir(), 'fwb-bench-'))
    try {
      await run(process.execPath, ['bench/run.mjs', '--quick', '--out', out], {
        cwd: root,
        env: { ...process.env, MONGODB_URI: inject('mongoUri') },
        timeout: 280_000,
        maxBuffer: 16 * 1024 * 1024,
      })
      const report = JSON.parse(await readFile(join(out, 'latest.json'), 'utf8')) as Report
      expect(report.mode).toBe('quick')
      expect(report.machine.cpus).toEqual(expect.any(Number))
      expect(report.machine.node).toBe(process.versions.node)
      expect(report.machine.server.version).toEqual(expect.any(String))
      expect(Object.keys(report.suites).sort()).toEqual([...SUITES].sort())
      for (const key of SUITES) {
        const suite = report.suites[key]!
        expect(suite.results.length, key).toBeGreaterThan(0)
        for (const row of suite.results) {
          expect(row.rate, `${key}: ${row.name}`).toEqual(expect.any(Number))
          if (!NO_COMMAND_COUNT.has(key)) expect(row.dbCommandsPer1kWrites, `${key}: ${row.name}`).toEqual(expect.any(Number))
        }
        for (const [name, value] of Object.entries(suite.ratios)) expect(value, `${key}.ratios.${name}`).toEqual(expect.any(Number))
      }
      // the tracing cost is measured (the API is a devDependency, hidden from one of the runs)
      expect(report.suites.hotPath!.ratios).toHaveProperty('insertOneTracingCost', expect.any(Number))
      // the read cache's cost on a collection no read has asked about is measured
      expect(report.suites.scaleCache!.ratios).toHaveProperty('writeOnlyCacheOnVsOff', expect.any(Number))
      // the overload suite: the in-flight limits swept, each row checked against the database (no
      // write lost, applied twice or told not written yet written: 'unknown' is a target, printed,
      // as on a replica set, where a 462 may answer the driver's resend of an applied attempt),
      // the adaptive limit's row or its absence said
      const overload = report.suites.overload as unknown as { results: OverloadRow[], adaptive: unknown, targets: unknown[] }
      expect(overload.results.filter(r => r.part === 'queue' && !r.adaptive).map(r => r.limit)).toEqual([1, 2, 4, 8, 16])
      expect(overload.results.filter(r => r.part === 'bucket').length).toBeGreaterThan(0)
      for (const r of overload.results) {
        expect({ row: r.name, lost: r.lost, duplicated: r.duplicated, phantom: r.phantom }).toEqual({ row: r.name, lost: 0, duplicated: 0, phantom: 0 })
      }
      expect(overload.adaptive).toEqual(expect.any(String))
      expect(overload.targets.length).toBeGreaterThan(0)
      expect(report.targets.length).toBeGreaterThan(0)
      for (const t of report.targets) expect(t.met, t.target).toEqual(expect.any(Boolean))
      expect(await readFile(join(out, 'latest.svg'), 'utf8')).toMatch(/^<svg[\s\S]*<\/svg>\n$/)
    } finally {
      await rm(out, { recursive: true, force: true })
    }
  }, 300_000)
})
