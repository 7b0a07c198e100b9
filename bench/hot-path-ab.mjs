// The hot path's CPU per write, this checkout against an earlier commit: interleaved pairs of
// runs (A then B, B then A, ...), each a fresh process pinned to one CPU where `taskset`
// exists, so drift on a shared machine hits both builds alike. Prints, per kind, the median of
// the pairs' ratios (this ÷ before; 1.03 = 3% more CPU per write) with its quartiles, and the
// ratio of the medians.
//   npm run build && node bench/hot-path-ab.mjs --baseline <ref> [--pairs 30] [--ops 1000000]
//     [--kinds insertOne,updateOne] [--jitter] [--node /path/to/node]
// --jitter: see hot-path-ab-worker.mjs (rounds of one fixed size can make one build pay for a
// grown young generation in every run); run both ways and report both.
import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { buildBaseline } from './baseline.mjs'

const { values: args } = parseArgs({
  options: {
    baseline: { type: 'string' },
    pairs: { type: 'string', default: '30' },
    ops: { type: 'string', default: '1000000' },
    kinds: { type: 'string', default: 'insertOne,updateOne' },
    jitter: { type: 'boolean', default: false },
    node: { type: 'string', default: process.execPath },
  },
})
if (args.baseline === undefined) throw new Error('--baseline <ref> is required: the commit to compare with')
const here = fileURLToPath(new URL('../dist/index.js', import.meta.url))
if (!existsSync(here)) throw new Error('no dist/index.js: run `npm run build` first')
const before = await buildBaseline(args.baseline)
if (before.entry === null) throw new Error(`the baseline does not build: ${before.reason}`)

const worker = fileURLToPath(new URL('./hot-path-ab-worker.mjs', import.meta.url))
const pinned = (() => { try { execFileSync('taskset', ['-c', '0', 'true']); return true } catch { return false } })()
const ops = Number(args.ops)

function run (module, kind) {
  const job = JSON.stringify({ module, kind, ops, warm: Math.min(ops, 50_000), jitter: args.jitter })
  const argv = [args.node, worker, job]
  const out = pinned ? execFileSync('taskset', ['-c', '1', ...argv], { encoding: 'utf8' }) : execFileSync(argv[0], argv.slice(1), { encoding: 'utf8' })
  return Number(out)
}

const quantile = (values, q) => [...values].sort((a, b) => a - b)[Math.floor(values.length * q)]
console.log(`node ${execFileSync(args.node, ['--version'], { encoding: 'utf8' }).trim()}, this checkout vs ${before.commit}, ` +
  `${args.pairs} pairs of ${ops.toLocaleString('en-US')} writes${args.jitter ? ', jitter' : ''}${pinned ? ', pinned to CPU 1' : ''}`)
for (const kind of args.kinds.split(',')) {
  const a = []
  const b = []
  const ratios = []
  for (let pair = 0; pair < Number(args.pairs); pair++) {
    let now, then
    if (pair % 2 === 0) { then = run(before.entry, kind); now = run(here, kind) } else { now = run(here, kind); then = run(before.entry, kind) }
    a.push(now)
    b.push(then)
    ratios.push(now / then)
  }
  const median = v => quantile(v, 0.5)
  console.log(`${kind}: ${median(a).toFixed(0)} ns/write, before ${median(b).toFixed(0)}; ` +
    `median pair ratio ${median(ratios).toFixed(3)} (quartiles ${quantile(ratios, 0.25).toFixed(3)}-${quantile(ratios, 0.75).toFixed(3)}), ` +
    `ratio of medians ${(median(a) / median(b)).toFixed(3)}`)
}
