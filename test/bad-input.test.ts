import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { BSON, MongoClient, ObjectId, type Db, type Document } from 'mongodb'
import { InvalidWriteError, WriteBuffer, WriteRejectedError } from '../src/index.js'
import { mongoUri, openDb } from './helpers.js'
import { capabilities, lacks } from './support/capabilities.js'

const MiB = 1024 * 1024
const LIMIT = 16 * MiB

let client: MongoClient
let db: Db

beforeAll(async () => { ({ client, db } = await openDb('bad_input')) })
afterAll(async () => { await client?.close() })

type Settled = PromiseSettledResult<unknown>

function expectInvalid (s: Settled | undefined, message: RegExp): void {
  expect(s?.status).toBe('rejected')
  const err = (s as PromiseRejectedResult).reason as InvalidWriteError
  expect(err).toBeInstanceOf(InvalidWriteError)
  expect(err).toBeInstanceOf(TypeError)
  expect(err.code).toBe('WRITE_BUFFER_INVALID_WRITE')
  expect(err.outcome).toBe('not-sent')
  expect(err.message).toMatch(message)
}

function expectAllFulfilled (results: Settled[]): void {
  const failed = results.filter(r => r.status === 'rejected').map(r => String((r as PromiseRejectedResult).reason))
  expect(failed).toEqual([])
}

/** Valid writes queued in the same tick as a bad one: they must all be acknowledged. */
function goodWrites (wb: WriteBuffer, name: string): Array<Promise<unknown>> {
  const c = wb.collection(name)
  return [
    ...Array.from({ length: 5 }, (_, i) => c.insertOne({ good: i })),
    c.updateOne({ _id: 'good-upsert' as never }, { $inc: { n: 1 } }, { upsert: true }),
  ]
}

async function expectGoodStored (name: string): Promise<void> {
  expect(await db.collection(name).countDocuments({ good: { $exists: true } })).toBe(5)
  expect(await db.collection(name).findOne({ _id: 'good-upsert' as never })).toEqual({ _id: 'good-upsert', n: 1 })
}

/** `{ _id, s }` of exactly `total` BSON bytes. */
function docOfSize (total: number): Document {
  const base = BSON.calculateObjectSize({ _id: new ObjectId(), s: '' })
  return { _id: new ObjectId(), s: 'x'.repeat(total - base) }
}

describe('1. Map operands are never merged into {}', () => {
  it('two same-target updateOnes with Map $set operands, queued together: both fields stored', async () => {
    const wb = new WriteBuffer(db, { lingerMs: 20 })
    const c = wb.collection('map_ops')
    await db.collection('map_ops').insertOne({ _id: 1 as never, n: 0 })
    const good = goodWrites(wb, 'map_ops')
    const writes = [
      c.updateOne({ _id: 1 }, { $set: new Map<string, unknown>([['a', 1]]) } as never),
      c.updateOne({ _id: 1 }, { $set: new Map<string, unknown>([['b', 2]]) } as never),
      c.updateOne({ _id: 1 }, { $set: { c: 3 }, $inc: { n: 1 } }),
      c.updateOne({ _id: 1 }, { $inc: new Map([['n', 10]]) } as never),
    ]
    expectAllFulfilled(await Promise.allSettled([...writes, ...good]))
    expect(await db.collection('map_ops').findOne({ _id: 1 as never })).toEqual({ _id: 1, n: 11, a: 1, b: 2, c: 3 })
    await expectGoodStored('map_ops')
    await wb.close()
  })
})

describe('2. insertOne({ _id: null }) reports the _id that is stored', () => {
  it('a generated ObjectId replaces null; the resolved insertedId is the stored one', async () => {
    const wb = new WriteBuffer(db, { lingerMs: 20 })
    const c = wb.collection('null_id')
    const good = goodWrites(wb, 'null_id')
    const [a, b] = await Promise.all([c.insertOne({ _id: null, k: 'a' } as never), c.insertOne({ _id: undefined, k: 'b' })])
    expectAllFulfilled(await Promise.allSettled(good))
    for (const [r, k] of [[a, 'a'], [b, 'b']] as const) {
      expect(r.insertedId).toBeInstanceOf(ObjectId)
      const stored = await db.collection('null_id').findOne({ k })
      expect(stored?._id).toEqual(r.insertedId)
    }
    expect(await db.collection('null_id').countDocuments({ _id: null as never })).toBe(0)
    await expectGoodStored('null_id')
    await wb.close()
  })
})

describe('3. the 16 MiB limit', () => {
  it('raw driver bulkWrite: 16 MiB − 1 is sent, 16 MiB is refused by the driver (the whole bulkWrite)', async () => {
    const raw = db.collection('limit_raw')
    await raw.bulkWrite([{ insertOne: { document: docOfSize(LIMIT - 1) } }])
    await expect(raw.bulkWrite([{ insertOne: { document: docOfSize(LIMIT) } }, { insertOne: { document: { small: 1 } } }]))
      .rejects.toThrow(/Document is larger than the maximum size 16777216/)
    expect(await raw.countDocuments({ small: 1 })).toBe(0) // its batch-mate went down with it
  })

  it('through the buffer: 16 MiB and more refused before queuing (not-sent); 16 MiB − 1 stored; batch-mates stored', async () => {
    const wb = new WriteBuffer(db, { lingerMs: 20 })
    const c = wb.collection('limit')
    const good = goodWrites(wb, 'limit')
    const sizes = [LIMIT - 1024, LIMIT - 16, LIMIT - 1, LIMIT, LIMIT + 1]
    const docs = sizes.map(docOfSize)
    const results = await Promise.allSettled(docs.map(d => c.insertOne(d)))
    expect(results.slice(0, 3).map(r => r.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled'])
    expectInvalid(results[3], /document is 16777216 bytes, over the 16 MiB BSON document limit \(at most 16777215 bytes can be sent\)/)
    expectInvalid(results[4], /document is 16777217 bytes/)
    expectAllFulfilled(await Promise.allSettled(good))
    const stored = await db.collection('limit').find({ s: { $exists: true } }, { projection: { _id: 1 } }).toArray()
    expect(stored.map(d => String(d._id)).sort()).toEqual(docs.slice(0, 3).map(d => String(d._id)).sort())
    await expectGoodStored('limit')
    await wb.close()
  })

  it('an update whose statement reaches 16 MiB (filter and update each under it) is refused alone', async () => {
    const wb = new WriteBuffer(db, { lingerMs: 20 })
    const c = wb.collection('limit_update')
    const good = goodWrites(wb, 'limit_update')
    const sized = (total: number): Document => {
      const base = BSON.calculateObjectSize({ q: { _id: 1 }, u: { $set: { s: '' } }, upsert: true })
      return { $set: { s: 'x'.repeat(total - base) } }
    }
    const results = await Promise.allSettled([
      c.updateOne({ _id: 1 }, sized(LIMIT), { upsert: true }),
      c.updateOne({ _id: 2 }, sized(LIMIT - 1), { upsert: true }),
    ])
    expectInvalid(results[0], /update statement \(filter, update, options\) is 16777216 bytes, over the 16 MiB/)
    expect(results[1]?.status).toBe('fulfilled')
    expectAllFulfilled(await Promise.allSettled(good))
    expect(await db.collection('limit_update').countDocuments({ s: { $exists: true } })).toBe(1)
    await expectGoodStored('limit_update')
    await wb.close()
  })
})

describe('4. per-write options', () => {
  it('bad arrayFilters / collation / hint values are refused alone, with valid writes in the same tick', async () => {
    const wb = new WriteBuffer(db, { lingerMs: 20 })
    const c = wb.collection('options') as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>
    const good = goodWrites(wb, 'options')
    const set = { $set: { a: 1 } }
    const bad: Array<[() => Promise<unknown>, RegExp]> = [
      [() => c.updateOne!({ _id: 1 }, set, { arrayFilters: { e: 1 } }), /arrayFilters must be an array of plain objects, got Object \{e\}/],
      [() => c.updateOne!({ _id: 1 }, set, { arrayFilters: [1] }), /arrayFilters\[0\] must be a plain object, got 1/],
      [() => c.updateMany!({}, set, { collation: 'en' }), /collation must be a plain object with a string locale, got "en"/],
      [() => c.deleteOne!({ _id: 1 }, { collation: { locale: 1 } }), /collation\.locale must be a non-empty string, got 1/],
      [() => c.updateOne!({ _id: 1 }, set, { hint: 1 }), /hint must be an index name or an index spec object, got 1/],
      [() => c.replaceOne!({ _id: 1 }, { a: 1 }, { hint: '' }), /hint must be an index name or an index spec object, got ""/],
      [() => c.replaceOne!({ _id: 1 }, { a: 1 }, { arrayFilters: [{ e: 1 }] }), /arrayFilters cannot be used with replaceOne/],
    ]
    const results = await Promise.allSettled(bad.map(([call]) => call()))
    bad.forEach(([, message], i) => { expectInvalid(results[i], message) })
    expectAllFulfilled(await Promise.allSettled(good))
    await expectGoodStored('options')
    await wb.close()
  })

  it('a hint the server alone can judge (no such index) never fails its batch-mates', async () => {
    const wb = new WriteBuffer(db, { lingerMs: 20 })
    const c = wb.collection('hint')
    await db.collection('hint').insertOne({ _id: 1 as never })
    const good = goodWrites(wb, 'hint')
    const hinted = await Promise.allSettled([c.updateOne({ _id: 1 }, { $set: { h: 1 } }, { hint: 'no_such_index_1' })])
    expectAllFulfilled(await Promise.allSettled(good))
    await expectGoodStored('hint')
    // a server that checks hints refuses it alone (a writeError); one that ignores them applies it
    if (capabilities().hintChecked) expect(hinted[0]?.status).toBe('rejected')
    if (hinted[0]?.status === 'rejected') expect((hinted[0].reason as WriteRejectedError).outcome).toBe('rejected')
    await wb.close()
  })

  // a server without arrayFilters refuses the whole update command, which fails every write of the batch
  it.skipIf(lacks('arrayFilters'))('an arrayFilters identifier that no path uses fails that write alone [needs arrayFilters]', async () => {
    const wb = new WriteBuffer(db, { lingerMs: 20 })
    const c = wb.collection('array_filters')
    await db.collection('array_filters').insertOne({ _id: 1 as never, a: [1, 2, 3] })
    const good = goodWrites(wb, 'array_filters')
    const [bad] = await Promise.allSettled([c.updateOne({ _id: 1 }, { $set: { 'a.$[e]': 0 } }, { arrayFilters: [{ z: { $gt: 1 } }] })])
    expect(bad?.status).toBe('rejected')
    expect((bad as PromiseRejectedResult).reason).toBeInstanceOf(WriteRejectedError)
    expectAllFulfilled(await Promise.allSettled(good))
    await expectGoodStored('array_filters')
    await wb.close()
  })
})

describe('5. the client\'s pkFactory', () => {
  it('makes the _ids of inserts without one (or with _id null); insertedId is what is stored', async () => {
    let n = 0
    const pkClient = new MongoClient(mongoUri(), { pkFactory: { createPk: () => `id-${n++}` } })
    try {
      const pkDb = pkClient.db(db.databaseName)
      const wb = new WriteBuffer(pkDb, { lingerMs: 20 })
      const c = wb.collection('pk_factory')
      const writes = Promise.all([c.insertOne({ k: 'a' }), c.insertOne({ _id: null, k: 'b' } as never), c.insertOne({ _id: 'own', k: 'c' } as never)])
      const good = goodWrites(wb, 'pk_factory') // same tick
      const results = await writes
      expectAllFulfilled(await Promise.allSettled(good))
      expect(results.map(r => r.insertedId)).toEqual(['id-0', 'id-1', 'own'])
      for (const [r, k] of [[results[0], 'a'], [results[1], 'b'], [results[2], 'c']] as const) {
        expect((await db.collection('pk_factory').findOne({ k }))?._id).toEqual(r?.insertedId)
      }
      // the good inserts got theirs from the factory too
      expect(await db.collection('pk_factory').countDocuments({ _id: { $regex: /^id-/ } as never })).toBe(7)
      await wb.close()
    } finally {
      await pkClient.close()
    }
  })
})

describe('6. values BSON would not send as written are refused, never stored or matched as something else', () => {
  const fn = (): number => 1
  /** a method passed where its result was meant: `user.id` for `user.id()` */
  const user = { name: 'ann', id (): string { return this.name } }

  async function notes (name: string): Promise<void> {
    await db.collection(name).insertMany([{ owner: 'ann', t: 1 }, { owner: 'bob', t: 2 }, { owner: 'cy', t: 3 }])
  }

  it('a function or a Symbol in a filter (sent as {}: every document) is refused naming its path; nothing changed, batch-mates stored', async () => {
    await notes('fn_filter')
    const wb = new WriteBuffer(db, { lingerMs: 20 })
    const c = wb.collection('fn_filter')
    const good = goodWrites(wb, 'fn_filter')
    const results = await Promise.allSettled([
      c.updateMany({ owner: user.id } as never, { $set: { flagged: true } }),
      c.deleteMany({ owner: Symbol.for('ann') } as never),
      c.deleteMany({ owner: { $nin: [fn] } } as never),
      c.deleteOne({ $and: [{ t: 1 }, { owner: fn }] } as never),
    ])
    expectInvalid(results[0], /"owner" is a function, which BSON does not send/)
    expectInvalid(results[1], /"owner" is a Symbol/)
    expectInvalid(results[2], /"owner\.\$nin\.0" is a function/)
    expectInvalid(results[3], /"\$and\.1\.owner" is a function/)
    expectAllFulfilled(await Promise.allSettled(good))
    expect(await db.collection('fn_filter').countDocuments({ owner: { $exists: true } })).toBe(3)
    expect(await db.collection('fn_filter').countDocuments({ flagged: true })).toBe(0)
    await expectGoodStored('fn_filter')
    await wb.close()
  })

  it('undefined as a filter value, on a client with ignoreUndefined (left out: every document), is refused; so it is on any client', async () => {
    await notes('undef_filter')
    const undefClient = new MongoClient(mongoUri(), { ignoreUndefined: true })
    try {
      const wb = new WriteBuffer(undefClient.db(db.databaseName), { lingerMs: 20 })
      const query: { owner?: string } = {} // a request without ?owner=
      const good = goodWrites(wb, 'undef_filter')
      const results = await Promise.allSettled([
        wb.collection('undef_filter').deleteMany({ owner: query.owner }),
        wb.collection('undef_filter').updateMany({ t: { $gt: 0 }, owner: query.owner }, { $set: { flagged: true } }),
      ])
      expectInvalid(results[0], /"owner" is undefined: sent as null .*ignoreUndefined/)
      expectInvalid(results[1], /"owner" is undefined/)
      expectAllFulfilled(await Promise.allSettled(good))
      expect(await db.collection('undef_filter').countDocuments({ owner: { $exists: true } })).toBe(3)
      expect(await db.collection('undef_filter').countDocuments({ flagged: true })).toBe(0)
      await expectGoodStored('undef_filter')
      await wb.close()
      const other = new WriteBuffer(db)
      expectInvalid((await Promise.allSettled([other.collection('undef_filter').deleteMany({ owner: query.owner })]))[0], /"owner" is undefined/)
      await other.close()
    } finally {
      await undefClient.close()
    }
  })

  it('an _id that is a Symbol, a function or an invalid Date is refused: the server would store another _id than insertedId', async () => {
    const wb = new WriteBuffer(db, { lingerMs: 20 })
    const c = wb.collection('bad_ids')
    const good = goodWrites(wb, 'bad_ids')
    const results = await Promise.allSettled([
      c.insertOne({ _id: Symbol('id'), tag: 'sym' } as never),
      c.insertOne({ _id: fn, tag: 'fn' } as never),
      c.insertOne({ _id: new Date(NaN), tag: 'date' } as never),
    ])
    expectInvalid(results[0], /_id cannot be Symbol\(id\)/)
    expectInvalid(results[1], /_id cannot be a function/)
    expectInvalid(results[2], /_id: an invalid Date .*1970-01-01/)
    expectAllFulfilled(await Promise.allSettled(good))
    expect(await db.collection('bad_ids').countDocuments({ tag: { $exists: true } })).toBe(0)
    await expectGoodStored('bad_ids')
    await wb.close()
  })

  it('an invalid Date in a document, an update, a replacement or a filter is refused naming its path; nothing stored as 1970-01-01', async () => {
    await db.collection('bad_dates').insertOne({ _id: 'u' as never, at: new Date(1) })
    const wb = new WriteBuffer(db, { lingerMs: 20 })
    const c = wb.collection('bad_dates')
    const good = goodWrites(wb, 'bad_dates')
    const bad = new Date('not a date')
    const results = await Promise.allSettled([
      c.insertOne({ tag: 'doc', at: bad }),
      c.updateOne({ _id: 'u' }, { $set: { at: bad } }),
      c.updateOne({ _id: 'u' }, { $min: { at: bad } }),
      c.replaceOne({ _id: 'u' }, { at: [bad] }),
      c.deleteMany({ at: { $gte: bad } }),
    ])
    expectInvalid(results[0], /at: an invalid Date/)
    expectInvalid(results[1], /\$set\.at: an invalid Date/)
    expectInvalid(results[2], /\$min\.at: an invalid Date/)
    expectInvalid(results[3], /at\.0: an invalid Date/)
    expectInvalid(results[4], /at\.\$gte: an invalid Date/)
    expectAllFulfilled(await Promise.allSettled(good))
    expect(await db.collection('bad_dates').countDocuments({ at: new Date(0) })).toBe(0)
    expect(await db.collection('bad_dates').findOne({ _id: 'u' as never })).toEqual({ _id: 'u', at: new Date(1) })
    await expectGoodStored('bad_dates')
    await wb.close()
  })
})
