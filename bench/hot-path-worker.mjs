// Child process (run with --expose-gc): CPU and allocations of the buffer's hot path
// over a no-op sink, so no I/O is measured. Prints a JSON summary on stdout.
// argv[2]: { ops, round, module?, otel? } — module: the build to measure (default: this
// checkout's dist); otel 'absent': @opentelemetry/api cannot be imported (otel-absent-hooks.mjs)
import Module, { createRequire, register } from 'node:module'
import v8 from 'node:v8'

const { ops, round, module = '../dist/index.js', otel = 'installed' } = JSON.parse(process.argv[2])
if (otel === 'absent') {
  register('./otel-absent-hooks.mjs', import.meta.url) // import()
  // require(): the build loads the API synchronously from CommonJS (src/opentelemetry-api.cjs),
  // which the hooks above do not reach on every Node version
  const resolveFilename = Module._resolveFilename
  Module._resolveFilename = function (request, ...rest) {
    if (request === '@opentelemetry/api') throw Object.assign(new Error(`Cannot find module '${request}' (hidden by the bench)`), { code: 'MODULE_NOT_FOUND' })
    return resolveFilename.call(this, request, ...rest)
  }
}
const { WriteBuffer } = await import(new URL(module, import.meta.url).href)
const ALLOC_ROUND = 1000
const ALLOC_SAMPLES = 10

const sink = { batches: 0, ops: 0 }
/** Bench-only stand-in for a mongodb Db: every bulkWrite succeeds at once. */
const fakeDb = {
  collection: name => ({
    collectionName: name,
    bulkWrite: async models => {
      sink.batches++
      sink.ops += models.length
      return { upsertedIds: {} }
    },
  }),
}

const wb = new WriteBuffer(fakeDb, { maxBatchSize: 1000 })
const col = wb.collection('c')
const kinds = {
  baseline: i => Promise.resolve({ i, s: 'x' }), // the harness alone: building the doc and awaiting
  insertOne: i => col.insertOne({ i, s: 'x' }),
  updateOne: i => col.updateOne({ _id: i }, { $set: { v: i } }),
}

async function runRound (write, n) {
  const promises = new Array(n)
  for (let i = 0; i < n; i++) promises[i] = write(i)
  await Promise.all(promises)
}

async function nsPerOp (write) {
  for (let r = 0; r < 5; r++) await runRound(write, round) // warm-up
  const start = process.hrtime.bigint()
  for (let done = 0; done < ops; done += round) await runRound(write, round)
  return Number(process.hrtime.bigint() - start) / ops
}

/** Heap growth over a round with no GC inside it, per op; median of the clean samples. */
async function bytesPerOp (write) {
  if (typeof globalThis.gc !== 'function') return null
  const samples = []
  for (let s = 0; s < ALLOC_SAMPLES; s++) {
    globalThis.gc()
    const profiler = new v8.GCProfiler()
    profiler.start()
    const before = process.memoryUsage().heapUsed
    await runRound(write, ALLOC_ROUND)
    const after = process.memoryUsage().heapUsed
    if (profiler.stop().statistics.length === 0) samples.push((after - before) / ALLOC_ROUND)
  }
  samples.sort((a, b) => a - b)
  return samples.length === 0 ? null : Math.round(samples[Math.floor(samples.length / 2)])
}

const otelImportable = await import('@opentelemetry/api').then(() => true, () => false) &&
  (() => { try { createRequire(import.meta.url)('@opentelemetry/api'); return true } catch { return false } })()
const out = { gcAvailable: typeof globalThis.gc === 'function', otelImportable, ops, round, results: {} }
for (const [kind, write] of Object.entries(kinds)) {
  const before = { ...sink }
  const ns = await nsPerOp(write)
  out.results[kind] = {
    nsPerOp: Math.round(ns),
    bytesPerOp: await bytesPerOp(write),
    sinkBatchesPer1k: kind === 'baseline' ? null : (sink.batches - before.batches) / (sink.ops - before.ops) * 1000,
  }
}
await wb.close()
process.stdout.write(JSON.stringify(out))
