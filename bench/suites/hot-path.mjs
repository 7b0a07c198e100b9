// Suite 6: CPU per write of the buffer itself (no-op sink), in a child with --expose-gc,
// for this checkout and for a baseline commit (before/after), alternating runs.
import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { buildBaseline } from '../baseline.mjs'
import { withProgress } from '../progress.mjs'
import { ratio, round } from '../stats.mjs'

const run = promisify(execFile)
const worker = fileURLToPath(new URL('../hot-path-worker.mjs', import.meta.url))
const KINDS = ['insertOne', 'updateOne']

async function measure (hotPathOps, module, otel = 'installed') {
  const args = ['--expose-gc', worker, JSON.stringify({ ops: hotPathOps, round: 10_000, module, otel })]
  const { stdout } = await run(process.execPath, args, { timeout: 120_000 })
  return JSON.parse(stdout)
}

/** Best (lowest ns/op) of several runs, per kind. */
function best (runs) {
  const out = structuredClone(runs[0])
  for (const r of runs.slice(1)) {
    for (const kind of ['baseline', ...KINDS]) {
      if (r.results[kind].nsPerOp < out.results[kind].nsPerOp) out.results[kind] = r.results[kind]
    }
  }
  return out
}

export async function hotPathSuite ({ hotPathOps, hotPathPasses: passes = 3, baselineRef }) {
  const before = baselineRef ? await buildBaseline(baselineRef) : { entry: null, reason: 'no --baseline given' }
  const nowRuns = []
  const noOtelRuns = []
  const beforeRuns = []
  await withProgress('hot path: no-op sink', async () => {
    for (let pass = 0; pass < passes; pass++) {
      nowRuns.push(await measure(hotPathOps, undefined))
      noOtelRuns.push(await measure(hotPathOps, undefined, 'absent'))
      if (before.entry !== null) {
        try {
          beforeRuns.push(await measure(hotPathOps, before.entry))
        } catch (err) {
          before.entry = null
          before.reason = `the baseline build does not run: ${String(err.message).split('\n')[0]}`
        }
      }
    }
  })
  const out = best(nowRuns)
  const noOtel = best(noOtelRuns)
  const old = beforeRuns.length > 0 ? best(beforeRuns) : null
  const { baseline } = out.results
  const results = KINDS.map(kind => {
    const r = out.results[kind]
    const o = old?.results[kind]
    return {
      key: kind,
      name: `${kind} (small doc${kind === 'updateOne' ? ', by _id' : ''})`,
      kind,
      rate: round(1e9 / r.nsPerOp),
      p50Ms: null,
      p99Ms: null,
      nsPerOp: r.nsPerOp,
      nsPerOpOverBaseline: r.nsPerOp - baseline.nsPerOp,
      nsPerOpBefore: o?.nsPerOp ?? null,
      costVsBefore: o === undefined ? null : ratio(r.nsPerOp, o.nsPerOp),
      nsPerOpWithoutOtel: noOtel.results[kind].nsPerOp,
      // @opentelemetry/api installed, no SDK registered ÷ the package absent (same build)
      tracingCost: out.otelImportable && !noOtel.otelImportable ? ratio(r.nsPerOp, noOtel.results[kind].nsPerOp) : null,
      bytesPerOp: r.bytesPerOp,
      dbCommandsPer1kWrites: r.sinkBatchesPer1k,
    }
  })
  const notes = [
    `${out.ops.toLocaleString('en-US')} ops per kind in rounds of ${out.round.toLocaleString('en-US')} awaited together; sink = fake Db whose bulkWrite resolves at once (commands per 1k = sink bulkWrite calls); best of ${passes} alternating runs`,
    old === null
      ? `before/after: not measured (${before.reason})`
      : `before = commit ${before.commit} built in .scratch/ (costVsBefore = ns/op now ÷ before; 1.05 = 5% slower)`,
    out.otelImportable && !noOtel.otelImportable
      ? 'tracingCost = ns/op with @opentelemetry/api installed and no SDK registered ÷ the same build with the package hidden (otel-absent-hooks.mjs); 1.03 = 3% slower'
      : 'tracingCost: not measured (@opentelemetry/api is not installed here, or could not be hidden)',
    `harness baseline (build the doc, await a resolved promise): ${baseline.nsPerOp} ns/op${baseline.bytesPerOp === null ? '' : `, ${baseline.bytesPerOp} B/op`}`,
    out.gcAvailable
      ? 'bytesPerOp: heap growth over 1,000-op rounds started right after gc() and run with no GC inside (v8.GCProfiler), median of the clean rounds'
      : 'bytesPerOp: not measured (gc() unavailable)',
  ]
  const ratios = { updateVsInsertCost: ratio(results[1].nsPerOp, results[0].nsPerOp) }
  for (const r of results) if (r.costVsBefore !== null) ratios[`${r.kind}CostVsBefore`] = r.costVsBefore
  for (const r of results) if (r.tracingCost !== null) ratios[`${r.kind}TracingCost`] = r.tracingCost
  return { title: 'Hot path: CPU per write, no-op sink', unit: 'ops/s', latencyIs: 'not applicable', results, baseline, ratios, notes }
}
