// Scale suite (issue 24): the library's own CPU per write as its work grows, against a stub Db
// whose bulkWrite answers after one setImmediate (no server: our code alone). Each row is
// printed as the ratio to its smallest case, measured in the same run (best of 3 interleaved rounds).
//   node bench/suites/scale-dispatch.mjs            (after npm run build)
import { WriteBuffer } from '../../dist/index.js'
import { stubDb } from '../stub-db.mjs'

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
  // creating the collections: their handles, then one awaited write in each (wall and CPU time)
  const t = performance.now()
  const cpu = process.cpuUsage()
  const handles = Array.from({ length: n }, (_, i) => wb.collection(`c${i}`))
  await Promise.all(handles.map(h => h.insertOne({ x: 0 })))
  const createMs = performance.now() - t
  const c = process.cpuUsage(cpu)
  const us = await cpuPerWrite(total, 1000, i => handles[i % n].insertOne({ i }))
  await wb.close()
  return { us, createMs, createCpuMs: (c.user + c.system) / 1000 }
}

/**
 * CPU µs per write when only the number of collections changes: waves of PER_COLLECTION writes
 * to each of WINDOW collections (taken in turn from the `n`), sent in one turn and awaited
 * together, `total` writes in all. Every wave has the same writes in flight and every batch the
 * same shape (a collection's writes of a wave go in one batch) whatever `n`, so the ratio
 * between collection counts is what the number of collections itself costs.
 */
const PER_COLLECTION = 10
const WINDOW = 100
async function sameBatchesRow (n, total) {
  const wb = new WriteBuffer(stubDb())
  const handles = Array.from({ length: n }, (_, i) => wb.collection(`c${i}`))
  await Promise.all(handles.map(h => h.insertOne({ x: 0 })))
  const wave = WINDOW * PER_COLLECTION
  const waves = Math.ceil(total / wave)
  const t0 = process.cpuUsage()
  for (let w = 0; w < waves; w++) {
    const writes = new Array(wave)
    for (let i = 0; i < wave; i++) writes[i] = handles[(w * WINDOW + i % WINDOW) % n].insertOne({ i })
    await Promise.all(writes)
  }
  const d = process.cpuUsage(t0)
  await wb.close()
  return { us: (d.user + d.system) / (waves * wave) }
}

/**
 * The stub's own cost per batch, measured alone: a bare loop of the calls it answers for each
 * batch (one bulkWrite, its promise and its setImmediate), awaited by as many callers as the
 * buffer keeps bulkWrites in flight (maxInFlight, 4 by default) over the same 10,000 collections.
 */
async function stubRow (total) {
  const db = stubDb()
  const collections = Array.from({ length: 10_000 }, (_, i) => db.collection(`c${i}`))
  const models = [{ insertOne: { document: {} } }]
  return { us: await cpuPerWrite(total, 4, i => collections[i % 10_000].bulkWrite(models, {})) }
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
    results: rows.map(r => ({ name: r.case, rate: Math.round(1e6 / r.usPerWrite), usPerWrite: r.usPerWrite, ratio: r.ratio, createMs: r.createMs, createCpuMs: r.createCpuMs, oursRatio: r.oursRatio })),
    ratios: {
      collections10kVs1: ratio('10000 collections'),
      // the same, less the stub's own cost of each batch (its row): what our code adds per write
      collections10kVs1WithoutStub: rows.find(r => r.case === '10000 collections')?.oursRatio ?? null,
      callers4000Vs100: ratio('4000 callers, one document, no merging'),
      // the same waves (10 writes to each of 100 collections taken in turn) over 10,000 collections and over 100
      collections10kVs100SameBatches: ratio(`10000 collections, waves of ${PER_COLLECTION} writes to ${WINDOW} of them`),
    },
    notes: [
      'stub Db: bulkWrite answers after one setImmediate, so the CPU measured is our own code; 1,000 callers await inserts round-robin over N collections; callers of one document send $push (never merged)',
      'at 10,000 collections each batch holds about one write (1,000 callers over 10,000 collections): the ratio left is the per-batch cost, not a walk over the collections',
      'the stub row is the stub alone (a bare loop of its bulkWrite calls, 4 in flight): its µs per call is in every batch, ours or not; collections10kVs1WithoutStub subtracts it',
      `same batches: waves of ${PER_COLLECTION} writes to each of ${WINDOW} collections taken in turn from N, sent in one turn and awaited together: the writes in flight and the batches are the same at every N, so the ratio is what the number of collections costs by itself`,
    ],
  }
}

/** Each case ROUNDS times, the rounds interleaved, best of (a shared machine's noise only adds time). */
const ROUNDS = 3

async function measure (scaleWrites) {
  await collectionsRow(100, 20_000) // warm-up
  const best = new Map()
  const keep = (key, r) => {
    const b = best.get(key)
    if (b === undefined) { best.set(key, { ...r }); return }
    for (const k of Object.keys(r)) b[k] = Math.min(b[k], r[k])
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (const n of [1, 100, 10_000]) keep(n, await collectionsRow(n, scaleWrites))
    keep('stub', await stubRow(scaleWrites))
    for (const n of [WINDOW, 10_000]) keep(`same${n}`, await sameBatchesRow(n, scaleWrites))
    for (const callers of [100, 4_000]) keep(`doc${callers}`, await oneDocumentRow(callers, 20_000))
  }
  const base = best.get(1)
  const stub = best.get('stub')
  const rows = []
  for (const n of [1, 100, 10_000]) {
    const r = best.get(n)
    const row = { case: `${n} collections`, usPerWrite: +r.us.toFixed(2), ratio: +(r.us / base.us).toFixed(2), createMs: +r.createMs.toFixed(1), createCpuMs: +r.createCpuMs.toFixed(1) }
    if (n === 10_000) row.oursRatio = +((r.us - stub.us) / base.us).toFixed(2) // about one write per batch: one stub call per write
    rows.push(row)
  }
  rows.push({ case: 'stub alone: its bulkWrite per batch', usPerWrite: +stub.us.toFixed(2), ratio: +(stub.us / base.us).toFixed(2) })
  const sameBase = best.get(`same${WINDOW}`)
  for (const n of [WINDOW, 10_000]) {
    const r = best.get(`same${n}`)
    rows.push({ case: `${n} collections, waves of ${PER_COLLECTION} writes to ${WINDOW} of them`, usPerWrite: +r.us.toFixed(2), ratio: +(r.us / sameBase.us).toFixed(2) })
  }
  const few = best.get('doc100')
  for (const callers of [100, 4_000]) {
    const r = best.get(`doc${callers}`)
    rows.push({ case: `${callers} callers, one document, no merging`, usPerWrite: +r.us.toFixed(2), ratio: +(r.us / few.us).toFixed(2) })
  }
  return rows
}

if (process.argv[1] === new URL(import.meta.url).pathname) {
  console.table(await measure(100_000))
}
