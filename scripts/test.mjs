// npm test: lint, build and typecheck side by side (three independent single-threaded tools: on two
// cores this halves their wall time), then vitest, which gets the arguments after `--`
// (`npm test -- test/x.test.ts`, .ci/run's reporters). Each tool's output is printed whole once it
// ends, in this order, so the three never interleave; any failure fails the run before vitest.
// The typecheck is incremental (its .tsbuildinfo in node_modules/.cache, outside git): tsc's own
// cache, exact by design. ESLint runs without --cache: its cache is per file, and the type-aware
// rules of src/ depend on other files.
import { spawn } from 'node:child_process'
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

const started = performance.now()
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
process.stdout.write(`> lint, build, typecheck: ${((performance.now() - started) / 1000).toFixed(1)} s\n`)
if (failed) process.exit(1)

const vitest = await run({ args: [bin('vitest'), 'run', ...process.argv.slice(2)] }, 'inherit')
process.exit(vitest.code)
