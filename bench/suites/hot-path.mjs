// Suite 6: CPU per write of the buffer itself (no-op sink), in a child with --expose-gc.
import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { withProgress } from '../progress.mjs'
import { ratio, round } from '../stats.mjs'

const run = promisify(execFile)
const worker = fileURLToPath(new URL('../hot-path-worker.mjs', import.meta.url))

export async function hotPathSuite ({ hotPathOps }) {
  const args = ['--expose-gc', worker, JSON.stringify({ ops: hotPathOps, round: 10_000 })]
  const { stdout } = await withProgress('hot path: no-op sink', () => run(process.execPath, args, { timeout: 120_000 }))
  const out = JSON.parse(stdout)
  const { baseline } = out.results
  const results = ['insertOne', 'updateOne'].map(kind => {
    const r = out.results[kind]
    return {
      key: kind,
      name: `${kind} (small doc${kind === 'updateOne' ? ', by _id' : ''})`,
      kind,
      rate: round(1e9 / r.nsPerOp),
      p50Ms: null,
      p99Ms: null,
      nsPerOp: r.nsPerOp,
      nsPerOpOverBaseline: r.nsPerOp - baseline.nsPerOp,
      bytesPerOp: r.bytesPerOp,
      dbCommandsPer1kWrites: r.sinkBatchesPer1k,
    }
  })
  const notes = [
    `${out.ops.toLocaleString('en-US')} ops per kind in rounds of ${out.round.toLocaleString('en-US')} awaited together; sink = fake Db whose bulkWrite resolves at once (commands per 1k = sink bulkWrite calls)`,
    `harness baseline (build the doc, await a resolved promise): ${baseline.nsPerOp} ns/op${baseline.bytesPerOp === null ? '' : `, ${baseline.bytesPerOp} B/op`}`,
    out.gcAvailable
      ? 'bytesPerOp: heap growth over 1,000-op rounds started right after gc() and run with no GC inside (v8.GCProfiler), median of the clean rounds'
      : 'bytesPerOp: not measured (gc() unavailable)',
  ]
  return {
    title: 'Hot path: CPU per write, no-op sink',
    unit: 'ops/s',
    latencyIs: 'not applicable',
    results,
    baseline,
    ratios: { updateVsInsertCost: ratio(results[1].nsPerOp, results[0].nsPerOp) },
    notes,
  }
}
