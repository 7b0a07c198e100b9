// Suite 1: what the driver alone gets from this server, one write at a time vs batched.
import { bestOf } from '../best-of.mjs'
import { freshDb, smallDoc } from '../db.mjs'
import { withProgress } from '../progress.mjs'
import { latency, per1k, rate, ratio } from '../stats.mjs'
import { timed } from '../timed.mjs'

const BULK_SIZES = [10, 100, 500, 1000, 5000, 10000]
const INSERT_MANY_SIZE = 1000

const docs = n => Array.from({ length: n }, (_, i) => smallDoc(i))
export const insertModels = n => docs(n).map(document => ({ insertOne: { document } }))

export async function rawSuite ({ uri, minMs, rawPasses: passes }) {
  const { client, db, commands } = await freshDb(uri, 'raw')
  const col = db.collection('c')
  const cases = [
    { name: 'insertOne, sequential', size: 1, call: i => col.insertOne(smallDoc(i)) },
    { name: 'insertOne, 100 in flight', size: 1, workers: 100, call: i => col.insertOne(smallDoc(i)) },
    { name: `insertMany (${INSERT_MANY_SIZE} docs per call)`, size: INSERT_MANY_SIZE, call: () => col.insertMany(docs(INSERT_MANY_SIZE)) },
    ...BULK_SIZES.flatMap(size => [true, false].map(ordered => ({
      name: `bulkWrite ${ordered ? 'ordered' : 'unordered'}, batch ${size}`,
      size,
      ordered,
      call: () => col.bulkWrite(insertModels(size), { ordered }),
    }))),
  ]
  const results = await bestOf(passes, cases, async (c, pass) => {
    await col.drop().catch(() => {})
    const snap = commands.snapshot()
    const run = await withProgress(`raw: ${c.name} (pass ${pass}/${passes})`, () => timed({ workers: c.workers, minMs }, c.call), minMs)
    const writes = run.calls * c.size
    const inserts = commands.since(snap, 'insert', 'c')
    return {
      name: c.name,
      batchSize: c.size,
      ordered: c.ordered,
      writes,
      rate: rate(writes, run.elapsedMs),
      ...latency(run.latencies),
      dbCommandsPer1kWrites: per1k(inserts.commands, writes),
    }
  })
  await client.close()
  const [sequential, inFlight] = results
  const base = sequential.rate
  for (const r of results) r.ratioVsSequential = ratio(r.rate, base)
  const unordered = results.filter(r => r.ordered === false)
  const best = unordered.reduce((a, b) => (b.rate > a.rate ? b : a))
  return {
    title: 'Raw driver inserts',
    unit: 'ops/s',
    latencyIs: 'per driver call',
    results,
    ratios: {
      bestBulkVsSequential: ratio(best.rate, base),
      bestBulkBatchSize: best.batchSize,
      inFlightVsSequential: ratio(inFlight.rate, base),
    },
    notes: [`best of ${passes} pass(es) per case, cases interleaved; the collection is dropped before each measurement`],
  }
}
