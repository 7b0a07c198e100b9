// Suite 2: the buffer's cost over hand-made unordered bulkWrites of the same size.
import { WriteBuffer } from '../../dist/index.js'
import { bestOf } from '../best-of.mjs'
import { freshDb, smallDoc } from '../db.mjs'
import { withProgress } from '../progress.mjs'
import { latency, per1k, rate, ratio, round } from '../stats.mjs'
import { timed } from '../timed.mjs'
import { insertModels } from './raw.mjs'

/** the buffer's default maxInFlight: raw gets the same concurrency */
const IN_FLIGHT = 4
/** callers per batch size: enough to keep IN_FLIGHT batches sent while the next ones fill */
const K = 8

export async function overheadSuite ({ uri, minMs, overheadPasses: passes, overheadSizes }) {
  const { client, db, commands } = await freshDb(uri, 'overhead')
  const results = []
  const comparisons = []
  const col = db.collection('c')
  for (const size of overheadSizes) {
    const variants = [
      { name: `raw bulkWrite unordered, batch ${size}, 1 in flight`, raw: true, run: () => timed({ minMs }, () => col.bulkWrite(insertModels(size), { ordered: false })), per: size },
      { name: `raw bulkWrite unordered, batch ${size}, ${IN_FLIGHT} in flight`, raw: true, run: () => timed({ minMs, workers: IN_FLIGHT }, () => col.bulkWrite(insertModels(size), { ordered: false })), per: size },
      { name: `WriteBuffer maxBatchSize ${size}, ${size * K} concurrent callers`, raw: false, run: () => buffered(db, size, minMs), per: 1 },
    ]
    const rows = await bestOf(passes, variants, async (v, pass) => {
      await col.drop().catch(() => {})
      const snap = commands.snapshot()
      const run = await withProgress(`overhead: ${v.name} (pass ${pass}/${passes})`, v.run, minMs)
      const writes = run.calls * v.per
      const inserts = commands.since(snap, 'insert', 'c')
      return {
        name: v.name,
        batchSize: size,
        raw: v.raw,
        writes,
        rate: rate(writes, run.elapsedMs),
        ...latency(run.latencies),
        dbCommandsPer1kWrites: per1k(inserts.commands, writes),
        avgBatch: round(inserts.statements / inserts.commands),
      }
    })
    results.push(...rows)
    const raw = rows.filter(r => r.raw).reduce((a, b) => (b.rate > a.rate ? b : a))
    const buffer = rows.find(r => !r.raw)
    comparisons.push({
      batchSize: size,
      bufferRate: buffer.rate,
      bestRawRate: raw.rate,
      bestRaw: raw.name,
      ratio: ratio(buffer.rate, raw.rate),
      overheadPct: round((1 - buffer.rate / raw.rate) * 100, 1),
      bufferAvgBatch: buffer.avgBatch,
    })
  }
  await client.close()
  return {
    title: 'Buffer overhead vs raw bulkWrite',
    unit: 'ops/s',
    latencyIs: 'per bulkWrite call (raw) or per awaited insertOne (WriteBuffer, includes waiting for its batch)',
    results,
    comparisons,
    ratios: Object.fromEntries(comparisons.map(c => [`bufferVsRaw_${c.batchSize}`, c.ratio])),
    notes: [`best of ${passes} pass(es) per variant, variants interleaved; raw gets 1 or ${IN_FLIGHT} bulkWrites in flight (the buffer's default maxInFlight), the better one counts`],
  }
}

/** size*K callers, each awaiting one insertOne through a fresh buffer, then the next. */
async function buffered (db, size, minMs) {
  const wb = new WriteBuffer(db, { maxBatchSize: size })
  const c = wb.collection('c')
  const run = await timed({ minMs, workers: size * K }, i => c.insertOne(smallDoc(i)))
  await wb.close()
  return run
}
