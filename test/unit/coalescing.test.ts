import { describe, expect, it } from 'vitest'
import { Long, type Document } from 'mongodb'
import { WriteRejectedError } from '../../src/index.js'
import { apply, bulkWriteError, settle, type Responder } from './fake-db.js'
import { harness } from './harness.js'

describe('coalescing', () => {
  it('folds same-target $set/$inc/$unset updateOnes queued together into one model', async () => {
    const { fake, wb, c } = harness()
    fake.seed('c', { _id: 1, n: 10, a: 0, z: true })
    const updates: Document[] = [
      { $set: { a: 1 } },
      { $inc: { n: 2 } },
      { $set: { a: 5, p: 1 } }, // a new path sorts after every path before it: see coalesce.ts
      { $inc: { n: 3 } },
      { $unset: { z: '' } },
    ]
    const copies = structuredClone(updates)
    const writes = updates.map(u => c.updateOne({ _id: 1 }, u))
    const results = await Promise.all(writes)

    expect(results).toEqual([{}, {}, {}, {}, {}])
    expect(fake.calls).toHaveLength(1)
    expect(fake.calls[0]?.models).toEqual([{
      updateOne: { filter: { _id: 1 }, update: { $set: { a: 5, p: 1 }, $inc: { n: 5 }, $unset: { z: '' } } },
    }])
    expect(fake.doc('c', 1)).toEqual({ _id: 1, n: 15, a: 5, p: 1 })
    expect(updates).toEqual(copies) // the callers' update objects are never mutated
    expect(wb.stats()).toMatchObject({ coalescedOps: 4, flushedOps: 5, failedOps: 0, pending: 0, batches: 1 })
  })

  it('keeps the first $setOnInsert only, and only the first upsert reports upsertedId', async () => {
    const { fake, c } = harness()
    const writes = [1, 2, 3].map(i => c.updateOne({ _id: 'u' }, { $setOnInsert: { created: i }, $inc: { hits: 1 } }, { upsert: true }))
    const results = await Promise.all(writes)
    expect(fake.calls).toHaveLength(1)
    expect(fake.calls[0]?.models).toEqual([{
      updateOne: { filter: { _id: 'u' }, update: { $setOnInsert: { created: 1 }, $inc: { hits: 3 } }, upsert: true },
    }])
    expect(results).toEqual([{ upsertedId: 'u' }, {}, {}])
    expect(fake.doc('c', 'u')).toEqual({ _id: 'u', created: 1, hits: 3 })
  })

  // [name, filter, first write, second write, first's options, second's options]
  const refused: Array<[string, Document, Document, Document, Document?, Document?]> = [
    ['a path under two operators', { _id: 1 }, { $inc: { n: 1 } }, { $set: { n: 5 } }],
    ['a path and its parent (a vs a.b)', { _id: 1 }, { $set: { a: { x: 1 } } }, { $set: { 'a.y': 2 } }],
    ['a path and its child (a.b vs a)', { _id: 1 }, { $set: { 'a.y': 2 } }, { $unset: { a: '' } }],
    ['a non-number $inc operand (Long) in the later write', { _id: 1 }, { $inc: { n: 1 } }, { $inc: { n: Long.fromNumber(2) } }],
    ['a non-number $inc operand (Long) in the earlier write', { _id: 1 }, { $inc: { n: Long.fromNumber(2) } }, { $inc: { n: 1 } }],
    ['an updated field in the filter', { _id: 1, status: 'new' }, { $set: { status: 'taken' } }, { $set: { by: 'x' } }],
    ['upsert on one only', { _id: 1 }, { $set: { a: 1 } }, { $set: { b: 1 } }, { upsert: true }, undefined],
    ['arrayFilters', { _id: 1 }, { $set: { a: 1 } }, { $set: { 'arr.$[e].v': 1 } }, undefined, { arrayFilters: [{ 'e.k': 1 }] }],
    ['a pipeline update', { _id: 1 }, { $set: { a: 1 } }, [{ $set: { b: 1 } }] as unknown as Document],
  ]
  it.each(refused)('refuses to merge %s: separate bulkWrites, submission order kept', async (_name, filter, u1, u2, o1, o2) => {
    const { fake, wb, c } = harness()
    const copies = structuredClone([u1, u2])
    const results = await Promise.all([c.updateOne(filter, u1, o1), c.updateOne(filter, u2, o2)])
    expect(results).toHaveLength(2)
    // same target: never in one bulkWrite, and the first is answered before the second goes
    expect(fake.calls.map(call => call.bodies.map(b => b.update as unknown))).toEqual([[u1], [u2]])
    expect(fake.calls[0]?.answeredAt).toBeLessThan(fake.calls[1]?.startedAt ?? 0)
    expect(wb.stats().coalescedOps).toBe(0)
    expect([u1, u2]).toEqual(copies)
  })

  it('does not fold a write past a same-target write it could not merge with (order kept)', async () => {
    const { fake, wb, c } = harness()
    fake.seed('c', { _id: 1, n: 0 })
    await Promise.all([
      c.updateOne({ _id: 1 }, { $inc: { n: 1 } }),
      c.updateOne({ _id: 1 }, { $set: { n: 5 } }), // conflicts with the $inc: skipped
      c.updateOne({ _id: 1 }, { $inc: { n: 2 } }), // must not jump ahead of the $set
    ])
    expect(fake.calls.map(call => call.bodies.map(b => b.update as unknown)))
      .toEqual([[{ $inc: { n: 1 } }], [{ $set: { n: 5 } }], [{ $inc: { n: 2 } }]])
    expect(fake.doc('c', 1)).toEqual({ _id: 1, n: 7 })
    expect(wb.stats().coalescedOps).toBe(0)
  })

  it('never merges where the order new fields are created in is not modelled (numeric, non-ASCII names, a.x vs a-b)', async () => {
    const pairs: Array<[Document, Document]> = [
      [{ $set: { 10: 1 } }, { $set: { 9: 1 } }], // '9' > '10' as strings, but MongoDB orders numeric names numerically
      [{ $set: { a: 1 } }, { $set: { é: 1 } }],
      [{ $set: { 'a.x': 1 } }, { $set: { 'a-b': 1 } }], // name by name a < a-b, as strings a-b < a.x
    ]
    for (const [first, second] of pairs) {
      const { fake, wb, c } = harness()
      await Promise.all([c.updateOne({ _id: 1 }, first), c.updateOne({ _id: 1 }, second)])
      expect(fake.calls.flatMap(call => call.bodies.map(b => b.update as unknown)), JSON.stringify(second)).toEqual([first, second])
      expect(wb.stats().coalescedOps).toBe(0)
    }
    // and where it is modelled, a later name merges
    const { fake, c } = harness()
    await Promise.all([c.updateOne({ _id: 1 }, { $set: { a: 1 } }), c.updateOne({ _id: 1 }, { $set: { b: 1 } })])
    expect(fake.calls.flatMap(call => call.bodies.map(b => b.update as unknown))).toEqual([{ $set: { a: 1, b: 1 } }])
  })

  it('merges writes of different targets only with their own target', async () => {
    const { fake, wb, c } = harness()
    const writes = []
    for (let i = 0; i < 9; i++) writes.push(c.updateOne({ _id: i % 3 }, { $inc: { n: 1 } }, { upsert: true }))
    await Promise.all(writes)
    expect(fake.calls).toHaveLength(1)
    expect(fake.calls[0]?.bodies).toEqual([0, 1, 2].map(id => ({ filter: { _id: id }, update: { $inc: { n: 3 } }, upsert: true })))
    expect(fake.docs('c').map(d => d.n as unknown)).toEqual([3, 3, 3])
    expect(wb.stats().coalescedOps).toBe(6)
  })

  it('coalesce: false sends every write as its own model', async () => {
    const { fake, wb, c } = harness({ coalesce: false })
    await Promise.all([c.updateOne({ _id: 1 }, { $inc: { n: 1 } }), c.updateOne({ _id: 1 }, { $inc: { n: 1 } })])
    expect(fake.calls.map(call => call.models.length)).toEqual([1, 1])
    expect(wb.stats().coalescedOps).toBe(0)
  })

  it('a coalesced op refused by the server is taken apart; each write is retried alone and only the guilty one fails', async () => {
    const { fake, wb, c } = harness()
    fake.seed('c', { _id: 1, n: 0 })
    // the "server" refuses any update that sets `zbad` (a validator, say)
    const validator: Responder = (call, db) => {
      const i = call.bodies.findIndex(b => (b.update as Document).$set?.zbad !== undefined)
      if (i >= 0) throw bulkWriteError([{ index: i, code: 121, errmsg: 'Document failed validation' }])
      return apply(call, db)
    }
    fake.fallback = validator
    const updates: Document[] = [{ $inc: { n: 1 } }, { $set: { zbad: true } }, { $inc: { n: 2 } }]
    const copies = structuredClone(updates)
    const [a, b, d] = await Promise.all(updates.map(u => settle(c.updateOne({ _id: 1 }, u))))

    expect(fake.calls.map(call => call.bodies.map(body => body.update as unknown))).toEqual([
      [{ $inc: { n: 3 }, $set: { zbad: true } }], // merged, refused
      [{ $inc: { n: 1 } }], // then one by one, in order
      [{ $set: { zbad: true } }],
      [{ $inc: { n: 2 } }],
    ])
    expect(a).toEqual({ status: 'fulfilled', value: {} })
    expect(d).toEqual({ status: 'fulfilled', value: {} })
    expect(b?.status).toBe('rejected')
    const err = b?.status === 'rejected' ? b.reason : undefined
    expect(err).toBeInstanceOf(WriteRejectedError)
    expect(err).toMatchObject({ code: 121, outcome: 'rejected', message: 'Document failed validation' })
    expect(fake.doc('c', 1)).toEqual({ _id: 1, n: 3 })
    expect(updates).toEqual(copies)
    expect(wb.stats()).toMatchObject({ coalescedOps: 0, flushedOps: 2, failedOps: 1, pending: 0 })
  })
})
