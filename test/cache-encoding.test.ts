import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { BSON, ObjectId, type Db, type Document, type MongoClient } from 'mongodb'
import { WriteBuffer } from '../src/index.js'
import type { BufferedCollection } from '../src/collection.js'
import { openDb } from './helpers.js'

/**
 * The cache keys and compares values exactly as the driver sends them (issue 25): a lone UTF-16
 * surrogate is sent as U+FFFD, and a value with toBSON() as what toBSON() returns. Each case
 * reads through the cache, writes through the buffer, and compares the cache's answer with the
 * server's.
 */
let client: MongoClient
let db: Db
beforeAll(async () => {
  ({ client, db } = await openDb('cache_encoding'))
})
afterAll(async () => { await client.close() })

const ejson = (v: unknown): string => BSON.EJSON.stringify(v, { relaxed: false })
const HIGH = '\uD800' // a high surrogate alone
const LOW = '\uDC00' // a low surrogate alone
const FFFD = '\uFFFD'

describe('lone surrogates are one value with U+FFFD, as the driver encodes them', () => {
  it('the driver sends a lone surrogate (value or field name) as U+FFFD', () => {
    for (const s of [HIGH, LOW, `a${HIGH}b`, `${LOW}${HIGH}`]) {
      const back = BSON.deserialize(BSON.serialize({ [s]: s }))
      expect(Object.entries(back)).toEqual([[s.replace(/[\uD800-\uDFFF]/g, FFFD), s.replace(/[\uD800-\uDFFF]/g, FFFD)]])
    }
  })

  const cases: Array<[string, Document, (c: BufferedCollection) => Promise<unknown>, Document]> = [
    // [label, document in the server, write through the buffer (a lone-surrogate spelling), cached read (the U+FFFD spelling)]
    ['updateOne by a high-surrogate _id', { _id: FFFD, v: 1 }, c => c.updateOne({ _id: HIGH }, { $set: { v: 2 } }), { _id: FFFD }],
    ['updateOne by a low-surrogate _id', { _id: `x${FFFD}`, v: 1 }, c => c.updateOne({ _id: `x${LOW}` }, { $set: { v: 2 } }), { _id: `x${FFFD}` }],
    ['deleteOne by a lone-surrogate _id', { _id: `d${FFFD}`, v: 1 }, c => c.deleteOne({ _id: `d${HIGH}` }), { _id: `d${FFFD}` }],
    ['insertOne with a lone surrogate in a value', { _id: 'other', name: 'z' }, c => c.insertOne({ _id: 'new', name: LOW }), { name: FFFD }],
    ['insertOne with a lone surrogate in a field name', { _id: 'other2', z: 1 }, c => c.insertOne({ _id: 'new2', [`k${HIGH}`]: 1 }), { [`k${FFFD}`]: 1 }],
    ['updateOne by a lone surrogate in a filter value', { _id: 'f', email: `e${FFFD}`, v: 1 }, c => c.updateOne({ email: `e${HIGH}` }, { $set: { v: 2 } }), { email: `e${FFFD}` }],
    ['$set a lone surrogate value another read filters on', { _id: 's', tag: 'a' }, c => c.updateOne({ _id: 's' }, { $set: { tag: HIGH } }), { tag: FFFD }],
    ['$set a lone surrogate field name', { _id: 'k', v: 1 }, c => c.updateOne({ _id: 'k' }, { $set: { [`n${LOW}`]: 5 } }), { _id: 'k' }],
  ]
  for (const [label, doc, write, read] of cases) {
    it(`${label}: the cached read of the U+FFFD spelling is not stale`, async () => {
      const name = `s${cases.findIndex(c => c[0] === label)}`
      await db.collection(name).deleteMany({})
      await db.collection(name).insertOne(doc)
      const wb = new WriteBuffer(db, { cache: { ttlMs: 60_000, negativeTtlMs: 60_000 } })
      const c = wb.collection(name)
      await c.findOne(read) // cached (a document or "not found")
      await write(c) // acknowledged
      const cached = await c.findOne(read)
      const server = await db.collection(name).findOne(read)
      expect(ejson(cached)).toBe(ejson(server))
      await wb.close()
    })
  }

  it('a read by a lone-surrogate spelling and one by U+FFFD are one cached read', async () => {
    await db.collection('one').deleteMany({})
    await db.collection('one').insertOne({ _id: FFFD as never, v: 1 })
    const wb = new WriteBuffer(db, { cache: { ttlMs: 60_000 } })
    const c = wb.collection('one')
    expect(await c.findOne({ _id: HIGH })).toEqual({ _id: FFFD, v: 1 })
    expect(await c.findOne({ _id: FFFD })).toEqual({ _id: FFFD, v: 1 })
    expect(wb.cache?.stats()).toMatchObject({ hits: 1, misses: 1 })
    await wb.close()
  })
})

describe('values the cache cannot key exactly are read from the server', () => {
  /** A value whose BSON is what toBSON() returns, not its own fields. */
  class Email {
    constructor (readonly address: string) {}
    toBSON (): string { return this.address.toLowerCase() }
  }

  it('a filter value with toBSON: the server\'s answer, never a cached one for its own fields', async () => {
    await db.collection('tobson').deleteMany({})
    await db.collection('tobson').insertMany([{ _id: 1 as never, email: 'a@x' }, { _id: 2 as never, email: 'A@X' }])
    const wb = new WriteBuffer(db, { cache: { ttlMs: 60_000 } })
    const c = wb.collection('tobson')
    for (let i = 0; i < 2; i++) {
      expect(await c.findOne({ email: new Email('A@X') })).toEqual({ _id: 1, email: 'a@x' })
      expect(await c.findOne({ email: 'A@X' })).toEqual({ _id: 2, email: 'A@X' })
    }
    expect(wb.cache?.stats().uncacheable).toBe(2)
    await wb.close()
  })

  it('a filter object with toBSON, a filter of another class, a Date or ObjectId with its own toBSON: read from the server', async () => {
    await db.collection('tobson2').deleteMany({})
    const oid = new ObjectId()
    const other = new ObjectId()
    await db.collection('tobson2').insertMany([{ _id: 1 as never, n: 1, at: new Date(0), ref: oid }, { _id: 2 as never, n: 2, at: new Date(1000), ref: other }])
    const wb = new WriteBuffer(db, { cache: { ttlMs: 60_000 } })
    const c = wb.collection('tobson2')
    const filterWithToBSON = { n: 1, toBSON: () => ({ n: 2 }) }
    const date = Object.assign(new Date(0), { toBSON: () => new Date(1000) })
    const ref = Object.assign(new ObjectId(oid.toHexString()), { toBSON: () => other })
    class Query { constructor (readonly n: number) {} }
    Object.defineProperty(Query.prototype, 'extra', { value: 1, enumerable: true }) // for..in sees it; the driver does not
    for (let i = 0; i < 2; i++) {
      expect(await c.findOne(filterWithToBSON as Document)).toMatchObject({ _id: 2 })
      expect(await c.findOne({ at: date })).toMatchObject({ _id: 2 })
      expect(await c.findOne({ ref })).toMatchObject({ _id: 2 })
      expect(await c.findOne(new Query(1) as unknown as Document)).toMatchObject({ _id: 1 })
    }
    // the same fields, sent as they are: the server's answers, not those of the reads above
    expect(await c.findOne({ at: new Date(0) })).toMatchObject({ _id: 1 })
    expect(await c.findOne({ ref: oid })).toMatchObject({ _id: 1 })
    expect(await c.findOne({ n: 1, extra: 1 })).toBeNull()
    expect(wb.cache?.stats()).toMatchObject({ hits: 0, uncacheable: 8 })
    await wb.close()
  })

  it('a write whose values have toBSON drops what it may change (what the server stores is what toBSON returns)', async () => {
    await db.collection('tobson3').deleteMany({})
    await db.collection('tobson3').insertOne({ _id: 1 as never, email: 'old@x' })
    const wb = new WriteBuffer(db, { cache: { ttlMs: 60_000, negativeTtlMs: 60_000 } })
    const c = wb.collection('tobson3')
    expect(await c.findOne({ email: 'new@x' })).toBeNull() // a cached miss
    expect(await c.findOne({ _id: 1 })).toEqual({ _id: 1, email: 'old@x' })
    await c.updateOne({ _id: 1 }, { $set: { email: new Email('NEW@X') } })
    expect(ejson(await c.findOne({ email: 'new@x' }))).toBe(ejson(await db.collection('tobson3').findOne({ email: 'new@x' })))
    expect(ejson(await c.findOne({ _id: 1 }))).toBe(ejson(await db.collection('tobson3').findOne({ _id: 1 as never })))
    await wb.close()
  })
})
