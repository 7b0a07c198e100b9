// Child process: how the read cache's CPU per operation grows with its work, over a stub Db
// whose bulkWrite answers after one setImmediate (and whose findOne answers after one
// setImmediate, with the document's BSON): no I/O, so the time measured is our own code.
// argv[2]: { module?, reads, writes, waves: number[], pendings: number[], misses: number[] }
// (the last case, inserts into a collection no read has asked about, cache on vs off, takes no argument)
// → JSON rows on stdout: µs of CPU (process.cpuUsage, user + system) per operation. Run with
// --expose-gc: the reads start on a collected heap.
import { BSON } from 'mongodb'

const { module = '../dist/index.js', reads, writes, waves, pendings, misses } = JSON.parse(process.argv[2])
const { WriteBuffer } = await import(new URL(module, import.meta.url).href)

const ID_BASE = 1_000_000 // documents the reads find: _id 0 … ID_BASE-1; writes go to ids from ID_BASE on
const docOf = id => ({ _id: id, email: `u${id}@x`, n: id })
const tick = () => new Promise(resolve => setImmediate(resolve))
/** while set, bulkWrite waits for it first (the reads at N pending keep their N writes pending) */
let held = null
const stubDb = {
  collection: name => ({
    collectionName: name,
    bsonOptions: {},
    bulkWrite: async () => { await held; await tick(); return { upsertedIds: {} } },
    findOne: async (filter) => {
      await tick()
      const id = filter._id ?? (typeof filter.email === 'string' ? Number(filter.email.slice(1, -2)) : NaN)
      return Number.isInteger(id) && id < ID_BASE ? BSON.serialize(docOf(id)) : null
    },
  }),
}
const open = () => new WriteBuffer(stubDb, { cache: { maxEntries: 1_000_000, maxBytes: 1 << 30, ttlMs: 600_000, negativeTtlMs: 600_000 }, maxPending: 10_000_000 })
const cpu = () => { const u = process.cpuUsage(); return u.user + u.system }
/** µs of CPU per op of `fn(n)`: the least of three passes (the first also warms the JIT up). */
async function perOp (n, fn) {
  let best = Infinity
  for (let pass = 0; pass < 3; pass++) {
    const t0 = cpu()
    await fn(n, pass)
    best = Math.min(best, (cpu() - t0) / n)
  }
  return Math.round(best * 100) / 100
}

const rows = []
// 1. Reads through the cache while `pending` writes (updates by _id of other documents) are
// queued and not yet acknowledged (the stub holds them while the reads run): a hit, a miss
// that finds its document by _id and by email, a miss that finds nothing. One buffer per case,
// the cases measured in alternation (the least of five passes each).
const readCases = []
for (const pending of pendings) {
  const wb = open()
  const users = wb.collection('users')
  for (let id = 0; id < reads; id++) await users.findOne({ _id: id }) // cached: the hits
  readCases.push({ wb, users, next: reads + readCases.length * 300_000, row: { case: 'reads', pending, hitUs: Infinity, missByIdUs: Infinity, missByEmailUs: Infinity, notFoundUs: Infinity } })
}
for (let pass = 0; pass < 5; pass++) {
  for (const c of readCases) {
    const { users, row } = c
    const kinds = {
      hitUs: i => users.findOne({ _id: i }),
      missByIdUs: () => users.findOne({ _id: c.next++ }),
      missByEmailUs: () => users.findOne({ email: `u${c.next++}@x` }),
      notFoundUs: () => users.findOne({ email: `nobody${c.next++}@x` }),
    }
    // each timed window long enough to be measured (a hit costs a few µs)
    const times = { hitUs: 20 * reads, missByIdUs: reads, missByEmailUs: reads, notFoundUs: 3 * reads }
    for (const [key, read] of Object.entries(kinds)) {
      const n = times[key]
      let release
      held = new Promise(resolve => { release = resolve })
      const done = []
      for (let i = 0; i < row.pending; i++) done.push(users.updateOne({ _id: ID_BASE + i }, { $inc: { v: 1 } }))
      globalThis.gc?.() // the garbage of queuing the writes is theirs, not the reads'
      const t0 = cpu()
      for (let i = 0; i < n; i++) await read(i % reads)
      row[key] = Math.min(row[key], (cpu() - t0) / n)
      held = null
      release()
      await Promise.all(done)
    }
  }
}
for (const { wb, row } of readCases) {
  for (const key of ['hitUs', 'missByIdUs', 'missByEmailUs', 'notFoundUs']) row[key] = Math.round(row[key] * 100) / 100
  rows.push(row)
  await wb.close()
}

// 2. Waves of writes (updates by _id, awaited together), alone and with a read (a miss, in
// flight while the wave is queued) after every tenth write.
for (const wave of waves) {
  const row = { case: 'waves', wave }
  for (const mixed of [false, true]) {
    const wb = open()
    const users = wb.collection('users')
    await users.findOne({ _id: 0 }) // a read has asked about the collection: its writes are indexed (case 4 is the other path)
    let next = 1
    row[mixed ? 'mixedUs' : 'aloneUs'] = await perOp(writes, async (n) => {
      for (let done = 0; done < n; done += wave) {
        const all = []
        for (let i = 0; i < wave; i++) {
          all.push(users.updateOne({ _id: ID_BASE + i }, { $inc: { v: 1 } }))
          if (mixed && i % 10 === 0) all.push(users.findOne({ _id: next++ % ID_BASE }))
        }
        await Promise.all(all)
      }
    })
    await wb.close()
  }
  rows.push(row)
}

// 3. Writes with `missCount` cached "not found" answers (reads by email that found nothing) and one cached document:
// updates by _id and inserts, in waves of 1,000. One buffer per case, all alive at once and
// measured in alternation (the least of five passes each), so that every case runs on the
// same heap: what differs is the work per write, not the garbage collector's.
const missCases = []
for (const missCount of misses) {
  const wb = open()
  const users = wb.collection('users')
  await users.findOne({ _id: 0 }) // with no misses too, a read has asked about the collection: its writes are indexed
  for (let i = 0; i < missCount; i++) await users.findOne({ email: `nobody${i}@x` })
  missCases.push({ wb, users, row: { case: 'misses', misses: missCount, entries: wb.cache.stats().entries, updateUs: Infinity, insertUs: Infinity } })
}
let nextId = 0
const wavesOf = async (n, write) => {
  for (let done = 0; done < n; done += 1000) {
    const all = []
    for (let i = 0; i < 1000; i++) all.push(write(i))
    await Promise.all(all)
  }
}
for (let pass = 0; pass < 5; pass++) {
  for (const { users, row } of missCases) {
    let t0 = cpu()
    await wavesOf(writes, i => users.updateOne({ _id: ID_BASE + i }, { $set: { name: `n${i}` }, $inc: { v: 1 } }))
    row.updateUs = Math.min(row.updateUs, (cpu() - t0) / writes)
    t0 = cpu()
    await wavesOf(writes, i => users.insertOne({ _id: 10 * ID_BASE + nextId++, email: `new${nextId}@x`, n: i }))
    row.insertUs = Math.min(row.insertUs, (cpu() - t0) / writes)
  }
}
for (const { wb, row } of missCases) {
  row.updateUs = Math.round(row.updateUs * 100) / 100
  row.insertUs = Math.round(row.insertUs * 100) / 100
  row.entriesAfter = wb.cache.stats().entries
  rows.push(row)
  await wb.close()
}

// 4. Inserts into a collection no read has asked about (events written beside a cached users
// collection), with the cache on and off: waves of 1,000, both buffers alive at once and
// measured in alternation (the least of five passes each).
const writeOnly = { case: 'writeOnly', cacheOnUs: Infinity, cacheOffUs: Infinity }
const cached = open()
await cached.collection('users').findOne({ _id: 0 }) // the cache is in use, on another collection
const plain = new WriteBuffer(stubDb, { maxPending: 10_000_000 })
for (let pass = 0; pass < 5; pass++) {
  for (const [key, wb] of [['cacheOnUs', cached], ['cacheOffUs', plain]]) {
    const events = wb.collection('events')
    const t0 = cpu()
    await wavesOf(writes, i => events.insertOne({ kind: 'click', n: i, at: new Date() }))
    writeOnly[key] = Math.min(writeOnly[key], (cpu() - t0) / writes)
  }
}
writeOnly.cacheOnUs = Math.round(writeOnly.cacheOnUs * 100) / 100
writeOnly.cacheOffUs = Math.round(writeOnly.cacheOffUs * 100) / 100
rows.push(writeOnly)
await Promise.all([cached.close(), plain.close()])
process.stdout.write(JSON.stringify(rows))
