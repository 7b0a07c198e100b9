// Scale suite (issue 24): the library's own CPU per write as its work grows, against a stub Db
// whose bulkWrite answers after one setImmediate (no server: our code alone). Each row is
// printed as the ratio to its smallest case, measured in the same run.
//   node bench/suites/scale-dispatch.mjs            (after npm run build)
import { WriteBuffer } from '../../dist/index.js'

const ANSWER = { insertedCount: 0, matchedCount: 0, modifiedCount: 0, deletedCount: 0, upsertedCount: 0, upsertedIds: {}, insertedIds: {} }

function stubDb () {
  const collections = new Map()
  return {
    databaseName: 'stub',
    command: async () => ({ ok: 1 }),
    collection (name) {
      let c = collections.get(name)
      if (c === undefined) {
        c = { collectionName: name, bulkWrite: () => new Promise(resolve => setImmediate(resolve, ANSWER)) }
        collections.set(name, c)
      }
      return c
    },
  }
}

/** CPU µs per write for `total` awaited writes made by `callers` concurrent loops. */
async function cpuPerWrite (total, callers, write) {
  let next = 0
  const t0 = process.cpuUsage()
  const loop = async () => {
    for (let i = next++; i < total; i = next++) await write(i)
  }
  await Promise.all(Array.from({ length: callers }, loop))
  const d = process.cpuUsage(t0)
  return (d.user + d.system) / total
}

async function collectionsRow (n, total) {
  const wb = new WriteBuffer(stubDb())
  const handles = Array.from({ length: n }, (_, i) => wb.collection(`c${i}`))
  const t = performance.now()
  await Promise.all(handles.map(h => h.insertOne({ x: 0 }))) // one queued write in each collection
  const createMs = performance.now() - t
  const us = await cpuPerWrite(total, 1000, i => handles[i % n].insertOne({ i }))
  await wb.close()
  return { us, createMs }
}

async function oneDocumentRow (callers, total) {
  const wb = new WriteBuffer(stubDb())
  const c = wb.collection('hot')
  // $push never merges: every write of the document waits behind the one in flight
  const us = await cpuPerWrite(total, callers, i => c.updateOne({ _id: 1 }, { $push: { xs: i } }))
  await wb.close()
  return { us }
}

export async function scaleDispatchSuite ({ scaleWrites = 100_000 } = {}) {
  const rows = await measure(scaleWrites)
  const ratio = name => rows.find(r => r.case === name)?.ratio ?? null
  return {
    title: 'Write path at scale: CPU per write as collections and callers of one document grow (stub Db)',
    unit: 'writes/s (CPU)',
    latencyIs: 'not measured (CPU µs per write, process.cpuUsage)',
    results: rows.map(r => ({ name: r.case, rate: Math.round(1e6 / r.usPerWrite), usPerWrite: r.usPerWrite, ratio: r.ratio, createMs: r.createMs })),
    ratios: { collections10kVs1: ratio('10000 collections'), callers4000Vs100: ratio('4000 callers, one document, no merging') },
    notes: [
      'stub Db: bulkWrite answers after one setImmediate, so the CPU measured is our own code; 1,000 callers await inserts round-robin over N collections; callers of one document send $push (never merged)',
      'at 10,000 collections each batch holds about one write (1,000 callers over 10,000 collections): the ratio left is the per-batch cost, not a walk over the collections',
    ],
  }
}

async function measure (scaleWrites) {
  const rows = []
  await collectionsRow(100, 20_000) // warm-up
  const base = await collectionsRow(1, scaleWrites)
  for (const n of [1, 100, 10_000]) {
    const r = n === 1 ? base : await collectionsRow(n, scaleWrites)
    rows.push({ case: `${n} collections`, usPerWrite: +r.us.toFixed(2), ratio: +(r.us / base.us).toFixed(2), createMs: +r.createMs.toFixed(1) })
  }
  const few = await oneDocumentRow(100, 20_000)
  for (const callers of [100, 4_000]) {
    const r = callers === 100 ? few : await oneDocumentRow(callers, 20_000)
    rows.push({ case: `${callers} callers, one document, no merging`, usPerWrite: +r.us.toFixed(2), ratio: +(r.us / few.us).toFixed(2) })
  }
  return rows
}

if (process.argv[1] === new URL(import.meta.url).pathname) {
  console.table(await measure(100_000))
}
