import { describe, expect, it } from 'vitest'
import { hold, keyOf, pause, type BulkCall } from './fake-db.js'
import { harness, loose, overlapping, type Harness } from './harness.js'

const GROUP: Record<string, string> = {
  insertOne: 'insert',
  updateOne: 'update',
  updateMany: 'update',
  replaceOne: 'update',
  deleteOne: 'delete',
  deleteMany: 'delete',
}

/** Answers held bulkWrites newest first, one per turn, until `done()`; returns how many were answered. */
async function driveLifo (h: Harness, done: () => boolean): Promise<void> {
  const until = Date.now() + 3000
  while (!done()) {
    if (Date.now() > until) throw new Error(`stuck: ${h.fake.held.length} held, stats ${JSON.stringify(h.wb.stats())}`)
    const held = h.fake.held
    held[held.length - 1]?.answer()
    await pause(0)
  }
}

function sharedIds (a: BulkCall, b: BulkCall): boolean {
  const keys = new Set(a.ids.map(keyOf))
  return b.ids.some(id => keys.has(keyOf(id)))
}

describe('ordering', () => {
  it('two writes to the same _id are never in one bulkWrite nor in two concurrent ones', async () => {
    const h = harness({ maxInFlight: 4, maxBatchSize: 3, coalesce: false })
    const { fake, wb, c } = h
    fake.fallback = hold
    let settled = 0
    const n = 40
    for (let i = 0; i < n; i++) {
      c.updateOne({ _id: i % 5 }, { $set: { v: i } }, { upsert: true }).then(() => { settled++ })
    }
    wb.flush() // due: every free slot takes what it can
    await driveLifo(h, () => settled === n)

    const calls = fake.calls
    let concurrent = 0
    for (const [i, a] of calls.entries()) {
      expect(new Set(a.ids).size).toBe(a.ids.length) // no _id twice in one bulkWrite
      for (const b of calls.slice(i + 1)) {
        if (overlapping(a, b)) {
          concurrent++
          expect(sharedIds(a, b)).toBe(false)
        }
      }
    }
    expect(concurrent).toBeGreaterThan(0) // the run did put bulkWrites on the wire side by side
    expect(calls.flatMap(x => x.ids)).toHaveLength(n)
    // last write wins for every document: submission order was kept per _id
    for (let k = 0; k < 5; k++) expect(fake.doc('c', k)).toEqual({ _id: k, v: n - 5 + k })
  })

  it('inserts, updates and deletes never share a bulkWrite (one write command per batch)', async () => {
    const { fake, c } = harness({ maxInFlight: 8 })
    fake.seed('c', { _id: 'u1' }, { _id: 'd1' }, { _id: 'r1' }, { _id: 'm1', x: 1 }, { _id: 'm2', y: 1 })
    await Promise.all([
      c.insertOne({ _id: 'i1' }),
      c.updateOne({ _id: 'u1' }, { $set: { a: 1 } }),
      c.deleteOne({ _id: 'd1' }),
      c.insertOne({ k: 'generated' }),
      c.replaceOne({ _id: 'r1' }, { b: 2 }),
      c.deleteMany({ x: 1 }),
      c.updateMany({ y: 1 }, { $set: { c: 3 } }),
      c.insertOne({ _id: 'i2' }),
    ])
    const groups = fake.calls.map(call => new Set(call.kinds.map(k => GROUP[k])))
    for (const g of groups) expect(g.size).toBe(1)
    expect(new Set(groups.flatMap(g => [...g]))).toEqual(new Set(['insert', 'update', 'delete']))
    expect(fake.calls.flatMap(call => call.kinds).sort()).toEqual(
      ['deleteMany', 'deleteOne', 'insertOne', 'insertOne', 'insertOne', 'replaceOne', 'updateMany', 'updateOne'])
    expect(fake.docs('c').map(d => d._id as unknown).filter(id => typeof id === 'string').sort())
      .toEqual(['i1', 'i2', 'm2', 'r1', 'u1'])
  })

  it.each([
    ['inserts with generated _ids', (h: Harness, i: number) => h.c.insertOne({ i })],
    ['updates of distinct documents', (h: Harness, i: number) => h.c.updateOne({ _id: i }, { $set: { i } }, { upsert: true })],
  ])('maxBatchSize splits %s into bulkWrites of at most that many', async (_name, write) => {
    const h = harness({ maxBatchSize: 4 })
    await Promise.all(Array.from({ length: 10 }, (_, i) => write(h, i)))
    expect(h.fake.calls.map(call => call.models.length)).toEqual([4, 4, 2])
    expect(h.fake.docs('c')).toHaveLength(10)
  })

  it('an update of a just-inserted (generated _id) document waits for the insert\'s bulkWrite to be answered', async () => {
    const { fake, wb, c } = harness({ maxInFlight: 4 })
    fake.next(hold)
    const doc: { _id?: unknown, n: number } = { n: 0 }
    const insert = c.insertOne(doc)
    const first = await fake.waitForCalls(1)
    const update = c.updateOne({ _id: doc._id }, { $inc: { n: 1 } })
    const flushed = wb.flush() // due: only the held target can keep it back
    await pause(20)
    expect(fake.calls).toHaveLength(1)
    first.answer()
    await Promise.all([insert, update, flushed])
    expect(fake.calls).toHaveLength(2)
    expect(fake.calls[1]?.startedAt).toBeGreaterThan(first.answeredAt)
    expect(fake.docs('c')).toEqual([{ _id: doc._id, n: 1 }])
  })

  it('filters with the same fields in another key order are the same target', async () => {
    const { fake, wb, c } = harness({ coalesce: false })
    fake.seed('c', { _id: 1, a: 1, b: 2 })
    fake.next(hold)
    const w1 = c.updateOne({ a: 1, b: 2 }, { $set: { v: 1 } })
    const w2 = c.updateOne({ b: 2, a: 1 }, { $set: { v: 2 } })
    const first = await fake.waitForCalls(1)
    wb.flush()
    await pause(20)
    expect(fake.calls).toHaveLength(1)
    first.answer()
    await Promise.all([w1, w2])
    expect(fake.calls.map(call => call.models.length)).toEqual([1, 1])
    expect(fake.doc('c', 1)).toMatchObject({ v: 2 })
  })

  it('an ordered collection sends one bulkWrite at a time, in submission order, whatever the targets', async () => {
    const h = harness({ maxInFlight: 4 })
    const { fake, wb } = h
    const c = loose(wb.collection('ord', { ordered: true }))
    fake.fallback = hold
    let settled = 0
    const writes = [
      c.insertOne({ _id: 'a' }),
      c.insertOne({ _id: 'b' }),
      c.updateOne({ _id: 'a' }, { $set: { v: 1 } }),
      c.insertOne({ _id: 'c' }),
      c.deleteOne({ _id: 'b' }),
    ]
    for (const w of writes) w.then(() => { settled++ })
    wb.flush()
    await driveLifo(h, () => settled === writes.length)
    expect(fake.calls.map(call => call.ids)).toEqual([['a', 'b'], ['a'], ['c'], ['b']])
    for (const [i, a] of fake.calls.entries()) {
      for (const b of fake.calls.slice(i + 1)) expect(overlapping(a, b)).toBe(false)
    }
    expect(fake.docs('ord')).toEqual([{ _id: 'a', v: 1 }, { _id: 'c' }])
  })
})
