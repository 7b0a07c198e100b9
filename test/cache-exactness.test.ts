import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { BSON, Long, ObjectId, type Db, type MongoClient } from 'mongodb'
import { WriteBuffer } from '../src/index.js'
import { countWriteCommands, openDb } from './helpers.js'

/** The read cache answers exactly what the server would, or asks the server. */
let client: MongoClient
let db: Db
let commands: ReturnType<typeof countWriteCommands>
beforeAll(async () => {
  ({ client, db } = await openDb('cache_exact'))
  commands = countWriteCommands(client)
})
afterAll(async () => { await client.close() })

const ejson = (v: unknown): string => BSON.EJSON.stringify(v, { relaxed: false })
const cached = (wb: WriteBuffer): number => wb.cache?.stats().hits ?? 0

describe('read cache exactness', () => {
  it('an ObjectId field never matches its hex string', async () => {
    const ref = new ObjectId()
    await db.collection('oid').insertOne({ _id: 1 as never, ref })
    const wb = new WriteBuffer(db, { cache: {} })
    const c = wb.collection('oid')
    expect(await c.findOne({ ref })).toMatchObject({ _id: 1 })
    expect(await c.findOne({ ref: ref.toHexString() })).toBeNull()
    expect(await c.findOne({ ref: ref.toHexString() })).toBeNull() // the cached null, still right
    expect(await db.collection('oid').findOne({ ref: ref.toHexString() })).toBeNull()
    // a write by the hex string matches nothing on the server: the cached document must not change
    await c.updateOne({ ref: ref.toHexString() }, { $set: { v: 1 } })
    expect(ejson(await c.findOne({ ref }))).toBe(ejson(await db.collection('oid').findOne({ ref })))
    await wb.close()
  })

  it('embedded documents and operators are never decided in-process: read through, same answer as the server', async () => {
    await db.collection('emb').insertOne({ _id: 1 as never, nested: { x: 1, y: 2 } })
    const wb = new WriteBuffer(db, { cache: {} })
    const c = wb.collection('emb')
    for (const filter of [{ nested: { y: 2, x: 1 } }, { nested: { x: 1, y: 2 } }, { 'nested.x': 1 }, { nested: { $exists: true } }]) {
      expect(ejson(await c.findOne(filter)), JSON.stringify(filter)).toBe(ejson(await db.collection('emb').findOne(filter)))
    }
    expect(wb.cache?.stats().entries).toBe(0)
    await wb.close()
  })

  it('Long values compare and increment exactly, and a cached answer keeps the BSON types an uncached one has', async () => {
    const exact = client.db(db.databaseName, { promoteLongs: false, promoteValues: false })
    const big = Long.fromString('9007199254740993') // not a JS number
    await db.collection('long').insertOne({ _id: 1 as never, n: big, small: 5, half: 1.5 })
    const wb = new WriteBuffer(exact, { cache: {} })
    const c = wb.collection('long')
    expect(await c.findOne({ n: Long.fromString('9007199254740992') })).toBeNull()
    const first = await c.findOne({ n: big })
    expect(ejson(first)).toBe(ejson(await exact.collection('long').findOne({ n: big })))
    await c.updateOne({ _id: 1 }, { $inc: { n: 1, small: 1, half: 1 } }) // int64, int32, double
    const before = cached(wb)
    const patched = await c.findOne({ _id: 1 })
    expect(cached(wb)).toBe(before + 0) // first read by _id: a miss
    const again = await c.findOne({ _id: 1 })
    expect(cached(wb)).toBe(before + 1)
    expect(ejson(again)).toBe(ejson(await exact.collection('long').findOne({ _id: 1 as never })))
    expect(ejson(patched)).toBe(ejson(again))
    // numbers match across their BSON types: a write by Long(6) selects the int32 6
    await c.updateOne({ small: Long.fromNumber(6) }, { $set: { seen: true } })
    expect(ejson(await c.findOne({ _id: 1 }))).toBe(ejson(await exact.collection('long').findOne({ _id: 1 as never })))
    await wb.close()
  })

  it('updateOne by a non-unique filter patches nothing and drops every entry it may touch', async () => {
    await db.collection('team').insertMany([{ _id: 1, team: 'red', v: 0 }, { _id: 2, team: 'red', v: 0 }] as never[])
    const wb = new WriteBuffer(db, { cache: {} })
    const c = wb.collection('team')
    await c.findOne({ _id: 1 })
    await c.findOne({ _id: 2 })
    expect(wb.cache?.stats().entries).toBe(2)
    await c.updateOne({ team: 'red' }, { $set: { v: 1 } }) // the server changes one of them
    expect(wb.cache?.stats().patches).toBe(0)
    expect(wb.cache?.stats().entries).toBe(0)
    for (const id of [1, 2]) expect(ejson(await c.findOne({ _id: id }))).toBe(ejson(await db.collection('team').findOne({ _id: id as never })))
    await wb.close()
  })

  it('$rename into a filtered field drops a cached "not found"', async () => {
    await db.collection('rename').insertOne({ _id: 1 as never, old: 'z@x' })
    const wb = new WriteBuffer(db, { cache: { negativeTtlMs: 60_000 } })
    const c = wb.collection('rename')
    expect(await c.findOne({ email: 'z@x' })).toBeNull()
    await c.updateOne({ _id: 1 }, { $rename: { old: 'email' } })
    expect(await c.findOne({ email: 'z@x' })).toMatchObject({ _id: 1, email: 'z@x' })
    await wb.close()
  })

  it('$where, $expr, $function are never evaluated in the app process', async () => {
    const g = globalThis as { fwbPwned?: boolean }
    delete g.fwbPwned
    await db.collection('where').insertOne({ _id: 1 as never, a: 1 })
    const wb = new WriteBuffer(db, { cache: {} })
    const c = wb.collection('where')
    await c.findOne({ a: 1 }) // a cached entry a write could be matched against
    const code = 'globalThis.fwbPwned = true; return true'
    await c.findOne({ $where: code }).catch(() => null) // the server may refuse it: its business
    await c.updateOne({ $where: code }, { $set: { b: 1 } }).catch(() => null)
    await c.findOne({ $expr: { $function: { body: 'function () { globalThis.fwbPwned = true; return true }', args: [], lang: 'js' } } }).catch(() => null)
    expect(g.fwbPwned).toBeUndefined()
    await wb.close()
  })

  it('replaceOne keeps _id first in a patched answer, as the server does', async () => {
    await db.collection('replace').insertOne({ _id: 7 as never, a: 1 })
    const wb = new WriteBuffer(db, { cache: {} })
    const c = wb.collection('replace')
    await c.findOne({ _id: 7 })
    await c.replaceOne({ _id: 7 }, { b: 2, _id: 7 } as never)
    const hit = await c.findOne({ _id: 7 })
    expect(wb.cache?.stats().patches).toBe(1)
    expect(Object.keys(hit ?? {})).toEqual(['_id', 'b'])
    expect(ejson(hit)).toBe(ejson(await db.collection('replace').findOne({ _id: 7 as never })))
    await wb.close()
  })

  it('maxBytes and maxEntries hold at all times, patches included; stats() counts evictions', async () => {
    await db.collection('bytes').insertMany(Array.from({ length: 10 }, (_, i) => ({ _id: i, s: 'x' })) as never[])
    const wb = new WriteBuffer(db, { cache: { maxBytes: 1024, maxEntries: 8 } })
    const c = wb.collection('bytes')
    for (let i = 0; i < 10; i++) await c.findOne({ _id: i })
    let s = wb.cache?.stats()
    expect(s?.entries).toBeLessThanOrEqual(8)
    expect(s?.evictions).toBeGreaterThanOrEqual(2)
    await c.updateOne({ _id: 9 }, { $set: { s: 'y'.repeat(900) } }) // the patch grows one entry past the budget
    s = wb.cache?.stats()
    expect(s?.bytes).toBeLessThanOrEqual(1024)
    expect(s).toMatchObject({ hits: expect.any(Number), misses: 10, entries: expect.any(Number) })
    await wb.close()
  })

  it('a miss by another field than _id waits only for the writes to the document it finds', async () => {
    await db.collection('wait').insertMany([{ _id: 1, email: 'a@x', n: 0 }, { _id: 2, email: 'b@x', n: 0 }] as never[])
    const wb = new WriteBuffer(db, { cache: {}, lingerMs: 60_000 })
    const c = wb.collection('wait')
    const pending = Array.from({ length: 200 }, () => c.updateOne({ _id: 2 }, { $inc: { n: 1 } }))
    const before = commands.total()
    // reads first, then looks: nothing queued touches a@x's document, so nothing is sent for it
    expect(await c.findOne({ email: 'a@x' })).toMatchObject({ _id: 1, n: 0 })
    expect(commands.total()).toBe(before)
    // b@x's document has writes queued before this read: the read sees them
    expect(await c.findOne({ email: 'b@x' })).toMatchObject({ _id: 2, n: 200 })
    await Promise.all(pending)
    await wb.close()
  })
})

describe('read cache exactness: projections', () => {
  it('a write by _id drops a cached read by that _id whose projection left _id out', async () => {
    await db.collection('proj_id').insertOne({ _id: 1 as never, name: 'a' })
    const wb = new WriteBuffer(db, { cache: { ttlMs: 60_000 } })
    const c = wb.collection('proj_id')
    const projection = { _id: 0, name: 1 }
    expect(await c.findOne({ _id: 1 }, { projection })).toEqual({ name: 'a' })
    await c.updateOne({ _id: 1 }, { $set: { name: 'b' } })
    expect(await c.findOne({ _id: 1 }, { projection })).toEqual({ name: 'b' })
    await wb.close()
  })

  it('a write by another field drops cached projections that may hide that field', async () => {
    await db.collection('proj_field').insertOne({ _id: 1 as never, name: 'a', email: 'e@x' })
    const wb = new WriteBuffer(db, { cache: { ttlMs: 60_000 } })
    const c = wb.collection('proj_field')
    const projection = { name: 1 }
    expect(await c.findOne({ _id: 1 }, { projection })).toEqual({ _id: 1, name: 'a' })
    await c.updateOne({ email: 'e@x' }, { $set: { name: 'c' } })
    expect(ejson(await c.findOne({ _id: 1 }, { projection }))).toBe(ejson(await db.collection('proj_field').findOne({ _id: 1 as never }, { projection })))
    await wb.close()
  })
})
