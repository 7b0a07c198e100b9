// npm test: lint, build, typecheck and the unit tests side by side (the unit tests need neither
// the build nor a server), then the integration tests. Each check's output is printed whole once
// it ends, in this order, so they never interleave; the unit tests print as they run. A failing
// check stops the run before the integration tests; a failing unit test fails it at the end.
// Arguments after `--` go to both vitest runs (.ci/run's reporters); a `--outputFile.json=F`
// report is the two runs merged into F. With a file filter (`npm test -- test/x.test.ts`) or a
// `--project` among them, one vitest run after the checks does what they ask (and says so when
// no file matches).
// The typecheck is incremental (its .tsbuildinfo in node_modules/.cache, outside git): tsc's own
// cache, exact by design. ESLint runs without --cache: its cache is per file, and the type-aware
// rules of src/ depend on other files.
import { spawn } from 'node:child_process'
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const require = createRequire(import.meta.url)
/** A package's command-line entry, from its package.json `bin` (packages do not all export the file itself). */
function bin (pkg, name = pkg) {
  const manifest = require.resolve(`${pkg}/package.json`)
  const { bin } = require(manifest)
  return join(dirname(manifest), typeof bin === 'string' ? bin : bin[name])
}

const checks = [
  { name: 'lint', args: [bin('eslint'), '--max-warnings', '0', '.'] },
  { name: 'build', args: ['scripts/build.mjs'] },
  {
    name: 'typecheck',
    args: [bin('typescript', 'tsc'), '-p', 'tsconfig.json', '--noEmit', '--incremental',
      '--tsBuildInfoFile', 'node_modules/.cache/fastify-write-buffer/typecheck.tsbuildinfo'],
  },
]

/** Runs node with `args`; resolves with its exit code and everything it printed. */
function run ({ args }, stdio = 'pipe') {
  return new Promise(resolve => {
    const child = spawn(process.execPath, args, { cwd: root, stdio: stdio === 'pipe' ? ['ignore', 'pipe', 'pipe'] : 'inherit' })
    let out = ''
    child.stdout?.on('data', chunk => { out += chunk })
    child.stderr?.on('data', chunk => { out += chunk })
    child.on('error', err => resolve({ code: 1, out: `${out}${err.message}\n` }))
    child.on('close', (code, signal) => resolve({ code: code ?? (signal === null ? 1 : 128), out }))
  })
}

const passed = process.argv.slice(2)
const JSON_OPTION = '--outputFile.json='
// options only (reporters and the like, each `--name=value`): a filter or a project choice runs vitest once
const split = passed.every(a => a.startsWith('--') && a.includes('=') && !a.startsWith('--project='))
const report = passed.find(a => a.startsWith(JSON_OPTION))?.slice(JSON_OPTION.length)
/** The arguments for one vitest run: its projects, and its own JSON report when one is asked for. */
function vitestArgs (projects, reportFile) {
  const args = passed.map(a => a.startsWith(JSON_OPTION) && reportFile !== undefined ? JSON_OPTION + reportFile : a)
  return [bin('vitest'), 'run', ...projects.flatMap(p => ['--project', p]), ...args]
}

const started = performance.now()
const unitReport = split && report !== undefined ? `${report}.unit.json` : undefined
if (unitReport !== undefined) rmSync(unitReport, { force: true })
const unit = split ? run({ args: vitestArgs(['unit'], unitReport) }, 'inherit') : Promise.resolve({ code: 0 })
const results = await Promise.all(checks.map(async check => {
  const t = performance.now()
  const r = await run(check)
  return { ...r, name: check.name, s: ((performance.now() - t) / 1000).toFixed(1) }
}))
let failed = false
for (const r of results) {
  process.stdout.write(`> ${r.name}: ${r.code === 0 ? 'ok' : `FAILED (exit ${r.code})`} in ${r.s} s\n${r.out}`)
  if (r.code !== 0) failed = true
}
const unitCode = (await unit).code
process.stdout.write(`> lint, build, typecheck${split ? ' and the unit tests' : ''}: ${((performance.now() - started) / 1000).toFixed(1)} s\n`)
if (failed) {
  // no report: a summary built from the unit tests alone would read as a passing run
  if (unitReport !== undefined) rmSync(unitReport, { force: true })
  process.exit(1)
}

const vitest = await run({ args: vitestArgs(split ? ['integration', 'integration-solo'] : []) }, 'inherit')
if (unitReport !== undefined) mergeReports(report, unitReport)
process.stdout.write(`> npm test: ${((performance.now() - started) / 1000).toFixed(1)} s\n`)
process.exit(unitCode !== 0 ? unitCode : vitest.code)

/** Adds the unit run's JSON report (vitest's json reporter, Jest's shape) into the integration run's. */
function mergeReports (into, from) {
  if (!existsSync(from)) return
  const a = existsSync(into) ? JSON.parse(readFileSync(into, 'utf8')) : undefined
  const b = JSON.parse(readFileSync(from, 'utf8'))
  rmSync(from)
  if (a === undefined) { writeFileSync(into, JSON.stringify(b)); return }
  const merged = { ...a }
  for (const key of Object.keys(a)) if (key.startsWith('num') && typeof a[key] === 'number' && typeof b[key] === 'number') merged[key] = a[key] + b[key]
  merged.success = a.success === true && b.success === true
  merged.startTime = Math.min(a.startTime, b.startTime)
  merged.testResults = [...b.testResults, ...a.testResults]
  writeFileSync(into, JSON.stringify(merged))
}
