// Child process: CPU cost of the read cache's bookkeeping as pending writes grow, over a fake
// Db (no I/O: the event-loop time measured is the cache's own). bulkWrite never answers, so
// the writes stay pending; findOne answers at once with the document's BSON.
// argv[2]: { pendings: number[], entries, ops } → JSON on stdout.
import { BSON } from 'mongodb'
import { WriteBuffer } from '../dist/index.js'

const { pendings, entries, ops } = JSON.parse(process.argv[2])
const docOf = id => ({ _id: id, email: `u${id}@x`, n: id, lastLoginAt: new Date(0) })
const fakeDb = {
  collection: name => ({
    collectionName: name,
    bsonOptions: {},
    bulkWrite: () => new Promise(() => {}), // writes stay pending
    findOne: async (filter) => {
      const id = filter._id ?? Number(String(filter.email).slice(1, -2))
      return Number.isInteger(id) ? BSON.serialize(docOf(id)) : null
    },
  }),
}

/** µs per op: the faster of two passes (the first one also warms the JIT up). */
async function perOp (n, fn) {
  let best = Infinity
  for (let pass = 0; pass < 2; pass++) {
    const t0 = performance.now()
    for (let i = 0; i < n; i++) await fn(pass * n + i)
    best = Math.min(best, (performance.now() - t0) / n)
  }
  return Math.round(best * 1000 * 100) / 100
}

const out = []
for (const pending of pendings) {
  const wb = new WriteBuffer(fakeDb, { cache: { maxEntries: entries * 2, ttlMs: 600_000 }, maxPending: 10_000_000, lingerMs: 60_000, maxInFlight: 1 })
  const users = wb.collection('users')
  for (let id = 0; id < entries; id++) await users.findOne({ _id: id }) // cached entries
  // pending writes to documents that are not cached (ids from 1,000,000 on)
  for (let i = 0; i < pending; i++) users.updateOne({ _id: 1_000_000 + i }, { $set: { v: i } }).catch(() => {})
  const row = { pending, entries }
  let next = 2_000_000
  row.missByIdUs = await perOp(ops, () => users.findOne({ _id: next++ }))
  row.missByEmailUs = await perOp(ops, () => users.findOne({ email: `u${next++}@x` }))
  row.hitUs = await perOp(ops, i => users.findOne({ _id: i % entries }))
  // a write patches its cached document (by _id): cost of noting it, in the caller's turn
  row.patchWriteUs = await perOp(ops, i => { users.updateOne({ _id: i % entries }, { $set: { lastLoginAt: new Date() }, $inc: { n: 1 } }).catch(() => {}) })
  // a write by another field: finds the entries it may touch through the per-field index
  row.fieldWriteUs = await perOp(ops, i => { users.updateOne({ email: `u${i % entries}@x` }, { $set: { v: 1 } }).catch(() => {}) })
  out.push(row)
}
process.stdout.write(JSON.stringify(out))
process.exit(0) // the fake's writes never settle: do not wait for them
