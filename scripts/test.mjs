// npm test: build, then vitest (it gets the arguments after `--`: `npm test -- test/x.test.ts`,
// .ci/run's reporters); lint and typecheck run beside both at the lowest CPU priority and are
// reported (whole, never interleaved) when the tests end; any failure fails the run.
// The typecheck is incremental (its .tsbuildinfo in node_modules/.cache, outside git): tsc's own
// cache, exact by design. ESLint runs without --cache: its cache is per file, and the type-aware
// rules of src/ depend on other files.
import { spawn } from 'node:child_process'
import { createRequire } from 'node:module'
import { setPriority } from 'node:os'
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

const lint = { name: 'lint', args: [bin('eslint'), '--max-warnings', '0', '.'] }
const build = { name: 'build', args: ['scripts/build.mjs'] }
const typecheck = {
  name: 'typecheck',
  args: [bin('typescript', 'tsc'), '-p', 'tsconfig.json', '--noEmit', '--incremental',
    '--tsBuildInfoFile', 'node_modules/.cache/fastify-write-buffer/typecheck.tsbuildinfo'],
}

/** Runs node with `args`; resolves with its exit code and everything it printed. `nice`: lowest CPU priority. */
function run ({ args }, { inherit = false, nice = false } = {}) {
  return new Promise(resolve => {
    const child = spawn(process.execPath, args, { cwd: root, stdio: inherit ? 'inherit' : ['ignore', 'pipe', 'pipe'] })
    if (nice && child.pid !== undefined) {
      try { setPriority(child.pid, 19) } catch { /* not allowed here: it runs at normal priority */ }
    }
    let out = ''
    child.stdout?.on('data', chunk => { out += chunk })
    child.stderr?.on('data', chunk => { out += chunk })
    child.on('error', err => resolve({ code: 1, out: `${out}${err.message}\n` }))
    child.on('close', (code, signal) => resolve({ code: code ?? (signal === null ? 1 : 128), out }))
  })
}

function timed (check, options) {
  const t = performance.now()
  return run(check, options).then(r => ({ ...r, name: check.name, s: ((performance.now() - t) / 1000).toFixed(1) }))
}

function report (r) {
  process.stdout.write(`> ${r.name}: ${r.code === 0 ? 'ok' : `FAILED (exit ${r.code})`} in ${r.s} s\n${r.out}`)
  return r.code === 0
}

// lint and typecheck at the lowest priority, beside the build and then the tests: they only read
// the sources, and they take the CPU the tests leave idle (the suite waits on servers and timers
// most of the time); the tests never depend on an idle core (the suite runs green beside a busy
// one: README, "Speed")
const started = performance.now()
const background = [timed(lint, { nice: true }), timed(typecheck, { nice: true })]
const built = await timed(build)
if (!report(built)) {
  for (const r of await Promise.all(background)) report(r)
  process.exit(1)
}
const vitest = await run({ args: [bin('vitest'), 'run', ...process.argv.slice(2)] }, { inherit: true })
let failed = vitest.code !== 0
for (const r of await Promise.all(background)) if (!report(r)) failed = true
process.stdout.write(`> npm test: ${((performance.now() - started) / 1000).toFixed(1)} s\n`)
process.exit(failed ? 1 : vitest.code)
