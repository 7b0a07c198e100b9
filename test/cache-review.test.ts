import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { BSON, Long, type Db, type Document, type MongoClient } from 'mongodb'
import { WriteBuffer } from '../src/index.js'
import { openDb } from './helpers.js'
import { lacks } from './support/capabilities.js'

/**
 * Regressions found in review of the read cache: each case reads through the cache, writes
 * through the buffer, and compares what the cache then answers with the server's own answer
 * (BSON types and field order included).
 */
let client: MongoClient
let db: Db
beforeAll(async () => {
  ({ client, db } = await openDb('cache_review'))
})
afterAll(async () => { await client.close() })

const ejson = (v: unknown): string => BSON.EJSON.stringify(v, { relaxed: false })

/** What the cache answers now, and what the server answers, for one read. */
async function both (wb: WriteBuffer, name: string, filter: Document, projection?: Document): Promise<[string, string]> {
  const options = projection === undefined ? undefined : { projection }
  const cached = await wb.collection(name).findOne(filter, options)
  await wb.flush()
  const server = await db.collection(name).findOne(filter, options)
  return [ejson(cached), ejson(server)]
}

describe('read cache review regressions', () => {
  it('integers past 2^53: double 2^60 and Long(2^60) are one document, Long(2^60 + 24) another', async () => {
    const X = 2 ** 60
    const A = Long.fromString('1152921504606846976') // 2^60 exactly
    const B = Long.fromString('1152921504606847000') // what String(2 ** 60) prints: another value
    await db.collection('big').insertMany([{ _id: A as never, who: 'A', v: 1 }, { _id: B as never, who: 'B' }])
    const wb = new WriteBuffer(db, { cache: { ttlMs: 60_000 } })
    const c = wb.collection('big')
    expect(await c.findOne({ _id: A })).toMatchObject({ who: 'A', v: 1 })
    await c.updateOne({ _id: X }, { $set: { v: 2 } }) // a double filter: equal to Long(2^60) on the server
    const [cached, server] = await both(wb, 'big', { _id: A })
    expect(cached).toBe(server)
    expect(await c.findOne({ _id: A })).toMatchObject({ who: 'A', v: 2 })
    // another cache, fresh: the double's answer must not be served for B
    const wb2 = new WriteBuffer(db, { cache: { ttlMs: 60_000 } })
    expect(await wb2.collection('big').findOne({ _id: X })).toMatchObject({ who: 'A' })
    expect(await wb2.collection('big').findOne({ _id: B })).toMatchObject({ who: 'B' })
    await wb.close()
    await wb2.close()
  })

  it('a read by another field whose projection leaves _id out sees a later write and delete by _id', async () => {
    await db.collection('proj').insertOne({ _id: 1 as never, email: 'a@x', name: 'old' })
    const wb = new WriteBuffer(db, { cache: { ttlMs: 60_000 } })
    const c = wb.collection('proj')
    const projection = { _id: 0, name: 1 }
    expect(await c.findOne({ email: 'a@x' }, { projection })).toEqual({ name: 'old' })
    await c.updateOne({ _id: 1 }, { $set: { name: 'new' } })
    expect(await c.findOne({ email: 'a@x' }, { projection })).toEqual({ name: 'new' })
    await c.deleteOne({ _id: 1 })
    expect(await c.findOne({ email: 'a@x' }, { projection })).toBeNull()
    // a projection that computes _id: not the document's _id either
    await db.collection('proj').insertOne({ _id: 2 as never, email: 'b@x', name: 'old' })
    const computed = { _id: '$email', name: 1 }
    const first = await c.findOne({ email: 'b@x' }, { projection: computed })
    await c.updateOne({ _id: 2 }, { $set: { name: 'new' } })
    const [cached, server] = await both(wb, 'proj', { email: 'b@x' }, computed)
    expect(cached).toBe(server)
    expect(ejson(first)).not.toBe(server)
    await wb.close()
  })

  // the cache follows MongoDB's rule; a server that creates them as written answers in another order
  it.skipIf(lacks('newFieldsInPathOrder'))('one update creates its new fields in the order the server does (by path, not as written) [needs new fields in path order]', async () => {
    await db.collection('order').insertMany([
      { _id: 1 as never, k: 0 }, { _id: 2 as never, k: 0 }, { _id: 3 as never, k: 0 }, { _id: 4 as never, k: 0 }, { _id: 5 as never, k: 0 },
    ])
    const wb = new WriteBuffer(db, { cache: { ttlMs: 60_000 } })
    const c = wb.collection('order')
    const updates: Array<[number, Document]> = [
      [1, { $set: { zeta: 1, alpha: 1 } }],
      [2, { $set: { zeta: 1 }, $inc: { alpha: 1 } }],
      [3, { $set: { 'b.y': 1, 'a.x': 1, 'b.x': 1 }, $max: { c: 2 } }],
      [4, { $set: { 10: 1, 9: 1 } }], // numeric names (numeric order on MongoDB): not patched
      [5, { $set: { 'a.x': 1 }, $max: { 'a-b': 2 } }], // a, a-b part by part; a-b, a.x as strings: not patched
    ]
    for (const [id] of updates) await c.findOne({ _id: id })
    for (const [id, update] of updates) await c.updateOne({ _id: id }, update)
    for (const [id] of updates) {
      const [cached, server] = await both(wb, 'order', { _id: id })
      expect(cached, String(id)).toBe(server)
    }
    expect(wb.cache?.stats().patches).toBe(3)
    await wb.close()
  })

  it('undefined in an update or a replacement: the cache shows what the driver sent (null by default)', async () => {
    for (const ignoreUndefined of [false, true]) {
      const opened = await openDb(`cache_review_undef_${String(ignoreUndefined)}`, { ignoreUndefined })
      try {
        await opened.db.collection('u').insertOne({ _id: 1 as never, a: 1, b: 'keep' })
        const wb = new WriteBuffer(opened.db, { cache: { ttlMs: 60_000 } })
        const c = wb.collection('u')
        await c.findOne({ _id: 1 })
        await c.updateOne({ _id: 1 }, { $set: { a: 2, b: undefined } })
        const afterUpdate = ejson(await c.findOne({ _id: 1 }))
        await wb.flush()
        expect(afterUpdate, `update, ignoreUndefined ${String(ignoreUndefined)}`).toBe(ejson(await opened.db.collection<{ _id: number }>('u').findOne({ _id: 1 })))
        await c.findOne({ _id: 1 })
        await c.replaceOne({ _id: 1 }, { a: 3, note: undefined, sub: { x: undefined } })
        const afterReplace = ejson(await c.findOne({ _id: 1 }))
        await wb.flush()
        expect(afterReplace, `replace, ignoreUndefined ${String(ignoreUndefined)}`).toBe(ejson(await opened.db.collection<{ _id: number }>('u').findOne({ _id: 1 })))
        await wb.close()
      } finally {
        await opened.db.dropDatabase()
        await opened.client.close()
      }
    }
  })

  it('two projections that differ only in key order are two reads', async () => {
    await db.collection('pkeys').insertOne({ _id: 1 as never, a: 1, b: 2 })
    const wb = new WriteBuffer(db, { cache: { ttlMs: 60_000 } })
    const p1 = { _id: 0, y: '$b', x: '$a' }
    const p2 = { _id: 0, x: '$a', y: '$b' }
    const [c1, s1] = await both(wb, 'pkeys', { _id: 1 }, p1)
    expect(c1).toBe(s1)
    const [c2, s2] = await both(wb, 'pkeys', { _id: 1 }, p2)
    expect(c2).toBe(s2)
    // undefined in a projection is sent as null or left out (ignoreUndefined): read through, not cached
    const entries = wb.cache?.stats().entries
    await wb.collection('pkeys').findOne({ _id: 1 }, { projection: { _id: 0, a: 1, b: undefined } })
    expect(wb.cache?.stats().entries).toBe(entries)
    await wb.close()
  })

  it('a $set of an own "__proto__" field (a body from JSON.parse) is not patched as a prototype', async () => {
    await db.collection('proto').insertOne({ _id: 1 as never, a: 1 })
    const wb = new WriteBuffer(db, { cache: { ttlMs: 60_000 } })
    const c = wb.collection('proto')
    await c.findOne({ _id: 1 })
    await c.updateOne({ _id: 1 }, { $set: JSON.parse('{"__proto__": 5, "b": 2}') as Document })
    const [cached, server] = await both(wb, 'proto', { _id: 1 })
    expect(cached).toBe(server)
    // inherited names are not fields: $inc of `constructor` creates it, as on the server
    await c.findOne({ _id: 1 })
    await c.updateOne({ _id: 1 }, { $inc: { constructor: 1 }, $max: { toString: 3 } })
    const [cached2, server2] = await both(wb, 'proto', { _id: 1 })
    expect(cached2).toBe(server2)
    await wb.close()
  })
})
