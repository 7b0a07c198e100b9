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
// A watchdog bounds the whole run: past FWB_SUITE_TIMEOUT_S seconds (default 1500) it names the
// test files that started and have not ended (test/unit/running-files-reporter.ts logs them), stops
// every command still running and exits 1. Each command runs in a process group of its own, so a
// test worker spinning in a loop is stopped with it: a stuck run ends as a failure naming its file,
// not at the CI's limit.
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { constants, tmpdir } from 'node:os'
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

const SUITE_TIMEOUT_S = Number(process.env.FWB_SUITE_TIMEOUT_S ?? 1500)
if (!(SUITE_TIMEOUT_S > 0)) {
  process.stderr.write(`FWB_SUITE_TIMEOUT_S must be a positive number of seconds, got ${JSON.stringify(process.env.FWB_SUITE_TIMEOUT_S)}\n`)
  process.exit(2)
}
const logDir = mkdtempSync(join(tmpdir(), 'fwb-test-'))
const runningLog = join(logDir, 'running.log')
process.on('exit', () => rmSync(logDir, { recursive: true, force: true }))
/** The commands running now (child → name), each the leader of its own process group. */
const running = new Map()
/** Every command's process group, ended or not: a test worker may outlive its vitest. */
const groups = new Set()
/** Set by stop(): nothing more starts, and what ends no longer moves the run on. */
let stopping = false

/** Runs node with `args`; resolves with its exit code and everything it printed. */
function run ({ name, args }, stdio = 'pipe') {
  return new Promise(resolve => {
    if (stopping) return
    const child = spawn(process.execPath, args, {
      cwd: root,
      detached: true, // its own process group: stop() reaches the test workers too
      env: { ...process.env, FWB_RUNNING_LOG: runningLog },
      stdio: stdio === 'pipe' ? ['ignore', 'pipe', 'pipe'] : 'inherit',
    })
    running.set(child, name)
    if (child.pid !== undefined) groups.add(child.pid)
    let out = ''
    child.stdout?.on('data', chunk => { out += chunk })
    child.stderr?.on('data', chunk => { out += chunk })
    const done = result => {
      running.delete(child)
      if (!stopping) resolve(result)
    }
    child.on('error', err => done({ code: 1, out: `${out}${err.message}\n` }))
    child.on('close', (code, signal) => done({ code: code ?? (signal === null ? 1 : 128), out }))
  })
}

/**
 * Ends the run with `code`: `signal` to every command's process group, then, a worker stuck in a
 * loop never running its signal handler, SIGKILL to whatever is left.
 */
function stop (signal, code) {
  if (stopping) return
  stopping = true
  const signalAll = sig => {
    for (const group of groups) {
      try { process.kill(-group, sig) } catch {} // already gone
    }
  }
  signalAll(signal)
  setTimeout(() => {
    signalAll('SIGKILL')
    process.exit(code)
  }, 3_000)
}

// Ctrl-C reaches only the terminal's foreground group, no longer the commands: pass it on.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => stop(signal, 128 + constants.signals[signal]))

/** The test files that started and have not ended, from the reporter's log, oldest first. */
function filesRunning () {
  const started = new Map()
  const log = existsSync(runningLog) ? readFileSync(runningLog, 'utf8') : ''
  for (const line of log.split('\n')) {
    const [event, at, project, ...file] = line.split(' ')
    const key = `${file.join(' ')} (${project})`
    if (event === 'start') started.set(key, Number(at))
    else if (event === 'end') started.delete(key)
  }
  return [...started].sort((a, b) => a[1] - b[1])
}

const watchdog = setTimeout(() => {
  const files = filesRunning()
  process.stdout.write(`\n> npm test: FAILED, still running after ${SUITE_TIMEOUT_S} s (FWB_SUITE_TIMEOUT_S): ${[...running.values()].join(', ') || 'nothing'}\n`)
  for (const [file, at] of files) process.stdout.write(`>   test file still running: ${file}, for ${((Date.now() - at) / 1000).toFixed(0)} s\n`)
  if (files.length === 0) process.stdout.write('>   no test file was running\n')
  stop('SIGTERM', 1)
}, SUITE_TIMEOUT_S * 1000)
watchdog.unref()

const passed = process.argv.slice(2)
const JSON_OPTION = '--outputFile.json='
// options only (reporters and the like, each `--name=value`): a filter or a project choice runs vitest once
const split = passed.every(a => a.startsWith('--') && a.includes('=') && !a.startsWith('--project='))
const report = passed.find(a => a.startsWith(JSON_OPTION))?.slice(JSON_OPTION.length)
const RUNNING_REPORTER = join(root, 'test/unit/running-files-reporter.ts')
/** The arguments for one vitest run: its projects, and its own JSON report when one is asked for. */
function vitestArgs (projects, reportFile) {
  const args = passed.map(a => a.startsWith(JSON_OPTION) && reportFile !== undefined ? JSON_OPTION + reportFile : a)
  // the watchdog's reporter, beside the ones asked for (or vitest's default: a reporter given replaces it)
  const reporters = [...(passed.some(a => a.startsWith('--reporter')) ? [] : ['--reporter=default']), `--reporter=${RUNNING_REPORTER}`]
  return { name: `vitest ${projects.join(', ') || 'run'}`, args: [bin('vitest'), 'run', ...projects.flatMap(p => ['--project', p]), ...args, ...reporters] }
}

const started = performance.now()
const unitReport = split && report !== undefined ? `${report}.unit.json` : undefined
if (unitReport !== undefined) rmSync(unitReport, { force: true })
const unit = split ? run(vitestArgs(['unit'], unitReport), 'inherit') : Promise.resolve({ code: 0 })
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

const vitest = await run(vitestArgs(split ? ['integration', 'integration-solo'] : []), 'inherit')
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
