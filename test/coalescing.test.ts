import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Db, MongoClient } from 'mongodb'
import { WriteBuffer } from '../src/index.js'
import { openDb } from './helpers.js'

let client: MongoClient
let db: Db
const statements: number[] = []

beforeAll(async () => {
  ({ client, db } = await openDb('coalescing'))
  client.on('commandStarted', ev => { if (ev.commandName === 'update') statements.push((ev.command.updates as unknown[]).length) })
})
afterAll(async () => { await client.close() })

describe('coalescing', () => {
  it('merges consecutive $inc/$set on one target into one op; every caller settles', async () => {
    const wb = new WriteBuffer(db, { lingerMs: 20 })
    const c = wb.collection('hot')
    await c.insertOne({ _id: 'h' as never, n: 0 })
    statements.length = 0
    const writes = []
    for (let i = 0; i < 300; i++) {
      writes.push(i % 2 === 0 ? c.updateOne({ _id: 'h' }, { $inc: { n: 2 } }) : c.updateOne({ _id: 'h' }, { $set: { last: i } }))
    }
    const results = await Promise.all(writes)
    expect(results).toHaveLength(300)
    expect(await db.collection('hot').findOne({ _id: 'h' as never })).toEqual({ _id: 'h', n: 300, last: 299 })
    const ops = statements.reduce((a, b) => a + b, 0)
    expect(ops).toBeLessThanOrEqual(3)
    expect(wb.stats().coalescedOps).toBeGreaterThanOrEqual(297)
    await wb.close()
  })

  it('1,000 updates over 10 hot documents cost at most 10 update statements', async () => {
    const wb = new WriteBuffer(db, { lingerMs: 20 })
    const c = wb.collection('ten')
    statements.length = 0
    const writes = []
    for (let i = 0; i < 1000; i++) writes.push(c.updateOne({ _id: i % 10 }, { $inc: { n: 1 } }, { upsert: true }))
    await Promise.all(writes)
    const docs = await db.collection('ten').find().toArray()
    expect(docs).toHaveLength(10)
    expect(docs.every(d => d.n === 100)).toBe(true)
    expect(statements.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(10)
    await wb.close()
  })

  it('does not merge conflicting operators on one field, yet applies both in order', async () => {
    const wb = new WriteBuffer(db, { lingerMs: 20 })
    const c = wb.collection('conflict')
    await c.insertOne({ _id: 1 as never, a: 1 })
    const before = wb.stats().coalescedOps
    await Promise.all([
      c.updateOne({ _id: 1 }, { $inc: { a: 5 } }),
      c.updateOne({ _id: 1 }, { $set: { a: 100 } }),
      c.updateOne({ _id: 1 }, { $unset: { a: '' } }),
      c.updateOne({ _id: 1 }, { $set: { 'b.c': 1 } }),
      c.updateOne({ _id: 1 }, { $set: { b: { d: 2 } } }), // prefix of b.c: not merged
    ])
    // only `$unset a` + `$set b.c` may merge (no shared path); the rest conflict pairwise
    expect(wb.stats().coalescedOps - before).toBe(1)
    expect(await db.collection('conflict').findOne({ _id: 1 as never })).toEqual({ _id: 1, b: { d: 2 } })
    await wb.close()
  })

  it('$setOnInsert is first-wins and only the first upsert reports upsertedId', async () => {
    const wb = new WriteBuffer(db, { lingerMs: 20 })
    const c = wb.collection('soi')
    const results = await Promise.all([1, 2, 3].map(i =>
      c.updateOne({ _id: 'u' }, { $setOnInsert: { created: i }, $inc: { hits: 1 } }, { upsert: true })))
    expect(results[0]?.upsertedId).toBe('u')
    expect(results[1]?.upsertedId).toBeUndefined()
    expect(await db.collection('soi').findOne({ _id: 'u' as never })).toEqual({ _id: 'u', created: 1, hits: 3 })
    await wb.close()
  })

  it('never merges when the update changes a filtered field', async () => {
    const wb = new WriteBuffer(db, { lingerMs: 20 })
    const c = wb.collection('claim')
    await db.collection('claim').insertMany([{ _id: 1, status: 'new' }, { _id: 2, status: 'new' }] as never[])
    await Promise.all([
      c.updateOne({ status: 'new' }, { $set: { status: 'taken', by: 'a' } }),
      c.updateOne({ status: 'new' }, { $set: { status: 'taken', by: 'b' } }),
    ])
    const docs = await db.collection('claim').find().sort({ _id: 1 }).toArray()
    expect(docs.map(d => d.status)).toEqual(['taken', 'taken'])
    expect(new Set(docs.map(d => d.by))).toEqual(new Set(['a', 'b']))
    await wb.close()
  })

  it('does not mutate the caller\'s update objects', async () => {
    const wb = new WriteBuffer(db, { lingerMs: 20 })
    const c = wb.collection('immut')
    const u1 = { $inc: { n: 1 } }
    const u2 = { $inc: { n: 1 } }
    await Promise.all([c.updateOne({ _id: 1 }, u1, { upsert: true }), c.updateOne({ _id: 1 }, u2, { upsert: true })])
    expect(u1).toEqual({ $inc: { n: 1 } })
    expect(u2).toEqual({ $inc: { n: 1 } })
    await wb.close()
  })

  it('a merged update refused by the server is split: only the guilty caller fails', async () => {
    await db.collection('split').insertOne({ _id: 1, s: 'text', n: 0 } as never)
    const wb = new WriteBuffer(db, { lingerMs: 20 })
    const c = wb.collection('split')
    const [bad, good] = await Promise.allSettled([
      c.updateOne({ _id: 1 }, { $inc: { s: 1 } }), // $inc on a string: refused
      c.updateOne({ _id: 1 }, { $set: { t: true } }), // 't' sorts after 's': it may coalesce
    ])
    expect(wb.stats().batches).toBe(3) // sent merged once, then split: each caller's own update alone
    expect(wb.stats().coalescedOps).toBe(0) // a split merge no longer counts
    expect(bad.status).toBe('rejected')
    expect((bad as PromiseRejectedResult).reason).toMatchObject({ outcome: 'rejected' })
    expect(typeof ((bad as PromiseRejectedResult).reason as { code: unknown }).code).toBe('number')
    expect(good.status).toBe('fulfilled')
    expect(await db.collection('split').findOne({ _id: 1 as never })).toEqual({ _id: 1, s: 'text', n: 0, t: true })
    await wb.close()
  })

  it("a follower's $setOnInsert is a no-op, as it would be one by one", async () => {
    const wb = new WriteBuffer(db, { lingerMs: 20 })
    const c = wb.collection('soi_follower')
    await Promise.all([
      c.updateOne({ _id: 'k' }, { $set: { x: 1 } }, { upsert: true }),
      c.updateOne({ _id: 'k' }, { $setOnInsert: { createdAt: 1 } }, { upsert: true }),
    ])
    expect(await db.collection('soi_follower').findOne({ _id: 'k' as never })).toEqual({ _id: 'k', x: 1 })
    await wb.close()
  })
})
