// fastify-write-buffer benchmark (issue 4). Usage:
//   MONGODB_URI=mongodb://… node bench/run.mjs [--quick] [--out <dir>] [--suites apiPath,http]
// (`npm run bench` builds and provides MONGODB_URI.) Prints Markdown on stdout, progress on
// stderr, and writes <out>/latest.json and <out>/latest.svg (default out: bench/results).
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { mkdir, writeFile } from 'node:fs/promises'
import { delimiter, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { satisfies } from 'semver'
import { machineInfo } from './machine.mjs'
import { chartGroups } from './report/chart-groups.mjs'
import { markdown } from './report/markdown.mjs'
import { svg } from './report/svg.mjs'
import { cacheBusSuite } from './suites/cache-bus.mjs'
import { cacheScaleSuite } from './suites/cache-scale.mjs'
import { coalescingSuite } from './suites/coalescing.mjs'
import { apiPathSuite } from './suites/api-path.mjs'
import { hotPathSuite } from './suites/hot-path.mjs'
import { httpSuite } from './suites/http.mjs'
import { loadCurveSuite } from './suites/load-curve.mjs'
import { loginSuite } from './suites/login.mjs'
import { loginDetachedSuite } from './suites/login-detached.mjs'
import { overheadSuite } from './suites/overhead.mjs'
import { overloadSuite } from './suites/overload.mjs'
import { rawSuite } from './suites/raw.mjs'
import { cpuAccountSuite } from './suites/cpu-account.mjs'
import { scaleCacheSuite } from './suites/scale-cache.mjs'
import { scaleDispatchSuite } from './suites/scale-dispatch.mjs'
import { evaluateTargets, suiteTargets } from './targets.mjs'
import { ACTIVE_LTS, nodeBinary } from '../scripts/node-binary.mjs'

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    // the "before" of the hot-path before/after comparison (a commit, tag or branch); the full
    // run defaults to the core before its restructuring, --quick measures none
    baseline: { type: 'string' },
    out: { type: 'string', default: fileURLToPath(new URL('./results', import.meta.url)) },
    // a comma-separated subset of the suites (their keys below, e.g. apiPath,http): the engine
    // comparison runs the API-path and HTTP rows on each engine (bench/README.md, "The path production takes")
    suites: { type: 'string' },
  },
})
const uri = process.env.MONGODB_URI
if (!uri) {
  console.error('MONGODB_URI is not set (use `npm run bench`, which provides it)')
  process.exit(2)
}

// The full run measures what users run: a Node within package.json's engines. On an older one
// (this machine's default is Node 20, whose V8 took ~550 ns and a new hidden class to add the
// `_id` of every document made by object spread, 45x a literal's: 2.5x this library's CPU per
// request in the CPU account) it starts itself again on the active LTS, fetched once from the
// registry. FWB_BENCH_NODE=current keeps the running Node; --quick (the smoke run) always does.
const engines = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).engines.node
if (!args.quick && process.env.FWB_BENCH_NODE !== 'current' && !satisfies(process.versions.node, engines)) {
  const bin = await nodeBinary(ACTIVE_LTS)
  console.error(`[bench] Node ${process.versions.node} is outside the package's engines (${engines}): measuring on Node ${ACTIVE_LTS} (FWB_BENCH_NODE=current keeps this one)`)
  const child = spawn(bin, process.argv.slice(1), { stdio: 'inherit', env: { ...process.env, PATH: `${dirname(bin)}${delimiter}${process.env.PATH}` } })
  const code = await new Promise(resolve => child.on('close', (c, signal) => resolve(c ?? (signal === null ? 1 : 128))))
  process.exit(code)
}

const mode = args.quick ? 'quick' : 'full'
const common = { baselineRef: args.baseline ?? (args.quick ? undefined : 'e27eba6') }
const settings = args.quick
  // quick: a smoke run (test/bench.test.ts): every suite and row once, windows of 1 s; its numbers are not quoted anywhere
  ? { ...common, uri, minMs: 100, rawPasses: 1, overheadPasses: 1, overheadSizes: [100, 1000], durationS: 1, loginDurationS: 1, curveDurationS: 1, curveRounds: 2, accountRounds: 1, hotPathOps: 20_000, hotPathPasses: 1, cacheScaleOps: 300, cacheBusTrials: 50, scaleWrites: 10_000, scaleCacheReads: 500, scaleCacheWrites: 10_000, apiPathWrites: 5_000, apiPathRounds: 1, overloadLimits: [1, 2, 4, 8, 16], overloadWarmS: 0.3, overloadRowS: 0.6, overloadCalmS: 0.6, overloadS: 2, overloadAfterS: 3, overloadSettleS: 15 }
  : { ...common, uri, minMs: 1500, rawPasses: 2, overheadPasses: 3, overheadSizes: [100, 1000, 5000], durationS: 10, jitWarmS: 4, loginDurationS: 10, curveDurationS: 5, curveRounds: 2, accountRounds: 2, hotPathOps: 200_000, hotPathPasses: 3, cacheScaleOps: 2_000, cacheBusTrials: 500, apiPathWrites: 60_000, apiPathRounds: 6, overloadWarmS: 1, overloadRowS: 3, overloadCalmS: 3, overloadS: 20, overloadAfterS: 10, overloadSettleS: 30 }
const ALL_SUITES = { raw: rawSuite, overhead: overheadSuite, apiPath: apiPathSuite, http: httpSuite, cpuAccount: cpuAccountSuite, loadCurve: loadCurveSuite, login: loginSuite, loginDetached: loginDetachedSuite, coalescing: coalescingSuite, cacheScale: cacheScaleSuite, cacheBus: cacheBusSuite, hotPath: hotPathSuite, scaleDispatch: scaleDispatchSuite, scaleCache: scaleCacheSuite, overload: overloadSuite }
const wanted = args.suites?.split(',').map(s => s.trim()).filter(s => s !== '')
for (const key of wanted ?? []) {
  if (!(key in ALL_SUITES)) {
    console.error(`--suites: no suite "${key}" (the suites: ${Object.keys(ALL_SUITES).join(', ')})`)
    process.exit(2)
  }
}
const SUITES = wanted === undefined ? ALL_SUITES : Object.fromEntries(Object.entries(ALL_SUITES).filter(([key]) => wanted.includes(key)))

const started = performance.now()
const report = { mode, startedAt: new Date().toISOString(), durationMs: 0, machine: await machineInfo(uri), suites: {}, targets: [] }
const measured = report.machine.server
console.error(`[bench] measuring ${measured.source} ${measured.version} (engine ${measured.engine}; reports MongoDB ${measured.reportsMongoVersion}) at ${uri.replace(/\/\/[^@/]*@/, '//…@')}`)
for (const [key, suite] of Object.entries(SUITES)) {
  const t = performance.now()
  report.suites[key] = await suite(settings)
  console.error(`[bench] ${key} done in ${((performance.now() - t) / 1000).toFixed(1)} s`)
  for (const m of report.suites[key].mismatches ?? []) console.error(`\n!!!!! MISMATCH in ${key}: ${m} !!!!!\n`)
}
report.durationMs = Math.round(performance.now() - started)
// the targets read every suite; a subset prints only the targets its suites evaluate themselves (overload)
report.targets = wanted === undefined ? evaluateTargets(report.suites) : suiteTargets(report.suites)

const heading = `fastify-write-buffer bench · ${mode} · ${report.startedAt.slice(0, 16).replace('T', ' ')} UTC · ` +
  `${report.machine.cpus} cores · Node ${report.machine.node} · ${report.machine.server.source} ${report.machine.server.version}`
await mkdir(args.out, { recursive: true })
await writeFile(join(args.out, 'latest.json'), JSON.stringify(report, null, 2) + '\n')
await writeFile(join(args.out, 'latest.svg'), svg(chartGroups(report), heading))
process.stdout.write(markdown(report))
console.error(`[bench] ${mode} run on ${measured.source} ${measured.version} took ${(report.durationMs / 1000).toFixed(1)} s; results in ${args.out}`)
