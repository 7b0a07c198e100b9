import { once } from 'node:events'
import { Agent, request as httpRequest } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import Fastify, { type FastifyInstance } from 'fastify'
import { BSON, MongoClient, ObjectId, type Document } from 'mongodb'
import writeBufferPlugin, { ErrorCodes, InvalidWriteError } from '../../src/index.js'
import { buildInsert, customPkFactory } from '../../src/write/build-op.js'
import { apply, FakeDb, settle } from './fake-db.js'
import { harness, HEAVY, loose, type Coll } from './harness.js'
import { WriteBuffer } from '../../src/write-buffer.js'

const MiB = 1024 * 1024
const LIMIT = 16 * MiB

/** The handle without argument types: these tests pass what the types forbid. */
type Loose = Record<Exclude<keyof Coll, 'collectionName'>, (...args: unknown[]) => Promise<unknown>>

async function until (done: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !done(); i++) await new Promise(resolve => setTimeout(resolve, 5))
}

function expectInvalid (s: { status: string, reason?: unknown }, message: RegExp): void {
  expect(s.status).toBe('rejected')
  const err = s.reason as InvalidWriteError
  expect(err).toBeInstanceOf(InvalidWriteError)
  expect(err).toBeInstanceOf(TypeError)
  expect(err.code).toBe(ErrorCodes.INVALID_WRITE)
  expect(err.outcome).toBe('not-sent')
  expect(err.message).toMatch(message)
}

/** A string value that makes `{ _id: ObjectId, s }` exactly `total` BSON bytes. */
function docOfSize (total: number): Document {
  const base = BSON.calculateObjectSize({ _id: new ObjectId(), s: '' })
  return { _id: new ObjectId(), s: 'x'.repeat(total - base) }
}

/** The statement the driver builds (and measures) for an updateOne: `{ q, u, upsert? }`. */
function updateOfStatementSize (total: number, upsert?: boolean): { filter: Document, update: Document } {
  const filter = { _id: 1 }
  const stmt = (s: string): Document => upsert === undefined ? { q: filter, u: { $set: { s } } } : { q: filter, u: { $set: { s } }, upsert }
  const base = BSON.calculateObjectSize(stmt(''))
  const s = 'x'.repeat(total - base)
  expect(BSON.calculateObjectSize(stmt(s))).toBe(total)
  return { filter, update: { $set: { s } } }
}

describe('1. coalescing never rewrites an operand it cannot copy exactly', () => {
  class Fields {
    constructor (readonly hidden: number) {}
    toBSON (): Document { return { a: this.hidden } }
  }
  class Plainish { a = 1 }
  const nullProto = (): Document => Object.assign(Object.create(null) as Document, { b: 2 })

  // [name, first update, second update]
  const notPlain: Array<[string, Document, Document]> = [
    ['a Map operand (first write)', { $set: new Map([['a', 1]]) }, { $set: { b: 2 } }],
    ['a Map operand (second write)', { $set: { b: 2 } }, { $set: new Map([['a', 1]]) }],
    ['Map operands in both', { $set: new Map([['a', 1]]) }, { $set: new Map([['b', 2]]) }],
    ['a Map $inc operand', { $inc: new Map([['n', 1]]) }, { $inc: { n: 2 } }],
    ['an operand with toBSON', { $set: new Fields(1) }, { $set: { b: 2 } }],
    ['a class-instance operand', { $set: { b: 2 } }, { $set: new Plainish() }],
    ['an operand with an own toBSON', { $set: { b: 2 } }, { $set: { c: 3, toBSON: () => ({ a: 1 }) } }],
  ]
  it.each(notPlain)('%s: each write is sent as given, in order', async (_name, u1, u2) => {
    const { fake, wb, c } = harness()
    const results = await Promise.all([c.updateOne({ _id: 1 }, u1), c.updateOne({ _id: 1 }, u2)])
    expect(results).toEqual([{}, {}])
    const sent = fake.calls.flatMap(call => call.bodies.map(b => b.update as unknown))
    expect(sent).toHaveLength(2)
    expect(sent[0]).toBe(u1) // the caller's own objects, untouched
    expect(sent[1]).toBe(u2)
    expect(wb.stats().coalescedOps).toBe(0)
  })

  it('plain operands, Object.create(null) included, still coalesce', async () => {
    const { fake, wb, c } = harness()
    await Promise.all([c.updateOne({ _id: 1 }, { $set: { a: 1 } }), c.updateOne({ _id: 1 }, { $set: nullProto() })])
    expect(fake.calls).toHaveLength(1)
    expect(fake.calls[0]?.bodies[0]?.update).toEqual({ $set: { a: 1, b: 2 } })
    expect(wb.stats().coalescedOps).toBe(1)
  })

  it('an update document that is not plain itself is not coalesced', async () => {
    class Update { $set = { a: 1 } }
    const { fake, wb, c } = harness()
    const u1 = new Update()
    await Promise.all([c.updateOne({ _id: 1 }, u1), c.updateOne({ _id: 1 }, { $set: { b: 2 } })])
    expect(fake.calls.flatMap(call => call.bodies.map(b => b.update as unknown))[0]).toBe(u1)
    expect(wb.stats().coalescedOps).toBe(0)
  })
})

describe('2. insertOne with _id null or undefined gets a generated _id, and reports it', () => {
  it.each([['null', null], ['undefined', undefined]])('_id: %s → a new ObjectId, generatedId true', (_name, id) => {
    const op = buildInsert({ _id: id, a: 1 }, undefined)
    expect(op.id).toBeInstanceOf(ObjectId)
    expect(op.generatedId).toBe(true)
    expect(op.fresh).toBe(true)
    expect(op.body.document?._id).toBe(op.id)
  })

  it('the resolved insertedId is the _id sent', async () => {
    const { fake, c } = harness()
    const doc = { _id: null, a: 1 }
    const [r, other] = await Promise.all([c.insertOne(doc), c.insertOne({ b: 1 })])
    expect(r.insertedId).toBeInstanceOf(ObjectId)
    expect(fake.calls[0]?.bodies[0]?.document?._id).toBe(r.insertedId)
    expect(other.insertedId).toBeInstanceOf(ObjectId)
    expect(fake.docs('c')).toHaveLength(2)
  })
})

describe('3. the 16 MiB limit is the driver\'s: statements of 16 MiB or more are refused before queuing', () => {
  it('insert: 16 MiB − 1 is accepted, exactly 16 MiB and 16 MiB + 1 are refused, batch-mates unaffected', HEAVY, async () => {
    const { fake, c } = harness({ lingerMs: 5 })
    const ok = docOfSize(LIMIT - 1)
    const exact = docOfSize(LIMIT)
    const over = docOfSize(LIMIT + 1)
    const s = await Promise.all([c.insertOne(ok), c.insertOne(exact), c.insertOne(over), c.insertOne({ small: 1 })].map(settle))
    expect(s[0]?.status).toBe('fulfilled')
    expectInvalid(s[1] as never, /document is 16777216 bytes, over the 16 MiB BSON document limit/)
    expectInvalid(s[2] as never, /document is 16777217 bytes, over the 16 MiB BSON document limit/)
    expect(s[3]?.status).toBe('fulfilled')
    expect(fake.calls.flatMap(call => call.ids)).toEqual([ok._id, expect.any(ObjectId)])
  })

  it('a document refused for its size is left as it was given: no _id written into it (review, issue 42 item 6)', HEAVY, async () => {
    const { c } = harness()
    const over = docOfSize(LIMIT + 1)
    delete over._id // with the _id the buffer would generate, it is 16 MiB + 1 again
    const nulled = { ...over, _id: null }
    const s = await Promise.all([c.insertOne(over), c.insertOne(nulled)].map(settle))
    expectInvalid(s[0] as never, /over the 16 MiB BSON document limit/)
    expectInvalid(s[1] as never, /over the 16 MiB BSON document limit/)
    expect('_id' in over).toBe(false)
    expect(nulled._id).toBeNull()
  })

  it('update: the { q, u, upsert } statement is measured, not its parts', HEAVY, async () => {
    const { fake, c } = harness({ lingerMs: 5 })
    const exact = updateOfStatementSize(LIMIT)
    const exactUpsert = updateOfStatementSize(LIMIT, true)
    const fits = updateOfStatementSize(LIMIT - 1, true)
    expect(BSON.calculateObjectSize(exact.update)).toBeLessThan(LIMIT) // each part alone passed the old check
    const s = await Promise.all([
      c.updateOne({ _id: 2 }, exact.update),
      c.updateOne({ _id: 3 }, exactUpsert.update, { upsert: true }),
      c.updateOne({ _id: 4 }, { $set: { small: 1 } }, { upsert: true }),
      c.updateOne({ _id: 5 }, fits.update, { upsert: true }),
    ].map(settle))
    expectInvalid(s[0] as never, /update statement \(filter, update, options\) is 16777216 bytes, over the 16 MiB/)
    expectInvalid(s[1] as never, /is 16777216 bytes, over the 16 MiB/)
    expect(s[2]?.status).toBe('fulfilled')
    expect(s[3]?.status).toBe('fulfilled')
    expect(fake.calls.flatMap(call => call.ids).sort()).toEqual([4, 5])
  })

  it('delete: a filter whose { q, limit } statement reaches 16 MiB is refused', HEAVY, async () => {
    const { c } = harness()
    const base = BSON.calculateObjectSize({ q: { s: '' }, limit: 1 })
    const s = await settle(c.deleteOne({ s: 'x'.repeat(LIMIT - base) }))
    expectInvalid(s, /delete statement \(filter, options\) is 16777216 bytes, over the 16 MiB/)
  })

  it('an undefined field counts as the null the driver sends', HEAVY, async () => {
    const { c } = harness()
    const doc = docOfSize(LIMIT - 3) // + `u: undefined` = 1 type byte + "u\0" = 3 bytes
    doc.u = undefined
    expectInvalid(await settle(c.insertOne(doc)), /is 16777216 bytes/)
  })
})

describe('4. per-write options are type-checked', () => {
  const ok = { $set: { a: 1 } }
  const bad: Array<[string, (c: Loose) => Promise<unknown>, RegExp]> = [
    ['arrayFilters not an array', c => c.updateOne({ _id: 1 }, ok, { arrayFilters: { e: 1 } }), /arrayFilters must be an array of plain objects, got Object \{e\}/],
    ['arrayFilters with a number', c => c.updateOne({ _id: 1 }, ok, { arrayFilters: [{ e: 1 }, 5] }), /arrayFilters\[1\] must be a plain object, got 5/],
    ['arrayFilters with an array', c => c.updateMany({}, ok, { arrayFilters: [[1]] }), /arrayFilters\[0\] must be a plain object, got an array of length 1/],
    ['arrayFilters a string', c => c.updateOne({ _id: 1 }, ok, { arrayFilters: 'e' }), /arrayFilters must be an array of plain objects, got "e"/],
    ['arrayFilters on replaceOne', c => c.replaceOne({ _id: 1 }, { a: 1 }, { arrayFilters: [{ e: 1 }] }), /arrayFilters cannot be used with replaceOne/],
    ['arrayFilters with a pipeline', c => c.updateOne({ _id: 1 }, [{ $set: { a: 1 } }], { arrayFilters: [{ e: 1 }] }), /arrayFilters cannot be used with an update pipeline/],
    ['collation a string', c => c.updateOne({ _id: 1 }, ok, { collation: 'en' }), /collation must be a plain object with a string locale, got "en"/],
    ['collation without locale', c => c.deleteOne({ _id: 1 }, { collation: { strength: 1 } }), /collation must be a plain object with a string locale, got Object \{strength\}/],
    ['collation with a numeric locale', c => c.replaceOne({ _id: 1 }, { a: 1 }, { collation: { locale: 5 } }), /collation\.locale must be a non-empty string, got 5/],
    ['collation with an empty locale', c => c.deleteMany({ a: 1 }, { collation: { locale: '' } }), /collation\.locale must be a non-empty string, got ""/],
    ['hint a number', c => c.updateOne({ _id: 1 }, ok, { hint: 5 }), /hint must be an index name or an index spec object, got 5/],
    ['hint an empty string', c => c.deleteOne({ _id: 1 }, { hint: '' }), /hint must be an index name or an index spec object, got ""/],
    ['hint an array', c => c.updateMany({}, ok, { hint: ['a'] }), /hint must be an index name or an index spec object, got an array of length 1/],
    ['hint null', c => c.replaceOne({ _id: 1 }, { a: 1 }, { hint: null }), /hint must be an index name or an index spec object, got null/],
    ['upsert a string', c => c.replaceOne({ _id: 1 }, { a: 1 }, { upsert: 'yes' }), /upsert must be a boolean, got "yes"/],
  ]
  it.each(bad)('%s: refused alone, its batch-mates are sent', async (_name, call, message) => {
    const { fake, c } = harness({ lingerMs: 5 })
    const good = [c.updateOne({ _id: 7 }, { $set: { a: 1 } }, { upsert: true }), c.insertOne({ _id: 8 })]
    const s = await settle(call(c as unknown as Loose))
    expectInvalid(s, message)
    await Promise.all(good)
    expect(fake.calls.flatMap(x => x.ids).sort()).toEqual([7, 8])
  })

  it('valid options are sent; options a write kind does not take are left out', async () => {
    const { fake, c } = harness()
    const arrayFilters = [{ 'e.k': 1 }]
    const collation = { locale: 'fr', strength: 1 }
    await Promise.all([
      c.updateOne({ _id: 1 }, { $set: { 'a.$[e].v': 1 } }, { arrayFilters, collation, hint: '_id_', upsert: true }),
      c.replaceOne({ _id: 2 }, { a: 1 }, { hint: { _id: 1 }, collation, upsert: false }),
      c.deleteOne({ _id: 3 }, { hint: '_id_', collation, upsert: true } as never),
      c.updateMany({ a: 1 }, { $set: { b: 1 } }, { hint: { a: 1 } }),
    ])
    const bodies = fake.calls.flatMap(x => x.models)
    expect(bodies).toContainEqual({ updateOne: { filter: { _id: 1 }, update: { $set: { 'a.$[e].v': 1 } }, arrayFilters, collation, hint: '_id_', upsert: true } })
    expect(bodies).toContainEqual({ replaceOne: { filter: { _id: 2 }, replacement: { a: 1 }, hint: { _id: 1 }, collation, upsert: false } })
    expect(bodies).toContainEqual({ deleteOne: { filter: { _id: 3 }, hint: '_id_', collation } })
    expect(bodies).toContainEqual({ updateMany: { filter: { a: 1 }, update: { $set: { b: 1 } }, hint: { a: 1 } } })
  })

  it('a key no write takes is refused, naming it (a typo, or a driver option a batch cannot honour per write); so is a timeoutMs past a day', async () => {
    const { fake, c } = harness()
    const good = c.insertOne({ _id: 'good' }, { session: undefined } as never) // a key set to undefined says nothing
    const refused = await Promise.all([
      settle(c.updateOne({ _id: 1 }, { $set: { a: 1 } }, { upsrt: true } as never)),
      settle(c.insertOne({ _id: 2 }, { writeConcern: { w: 0 } } as never)),
      settle(c.deleteOne({ _id: 3 }, { session: {} } as never)),
      settle(c.insertOne({ _id: 4 }, { timeoutMs: 3e9 })),
    ])
    expectInvalid(refused[0] as { status: string, reason?: unknown }, /unknown write option "upsrt"/)
    expectInvalid(refused[1] as { status: string, reason?: unknown }, /unknown write option "writeConcern".*writeConcern is the buffer's/)
    expectInvalid(refused[2] as { status: string, reason?: unknown }, /unknown write option "session".*sessions and transactions need the driver/)
    expectInvalid(refused[3] as { status: string, reason?: unknown }, /timeoutMs must be a positive number up to 86400000/)
    await good
    expect(fake.calls.flatMap(x => x.ids)).toEqual(['good'])
  })
})

describe('5. the client\'s pkFactory makes the _ids the buffer generates', () => {
  class PkFakeDb extends FakeDb {
    constructor (readonly options: Document) { super() }
  }

  it('insertOne without _id (or with _id null) gets createPk()\'s id; it counts as the caller\'s, not fresh', async () => {
    let n = 0
    const fake = new PkFakeDb({ pkFactory: { createPk: () => `id-${n++}` } })
    const wb = new WriteBuffer(fake.db)
    try {
      const c = loose(wb.collection('c'))
      const results = await Promise.all([c.insertOne({ a: 1 }), c.insertOne({ _id: null, a: 2 }), c.insertOne({ _id: 'mine', a: 3 })])
      expect(results.map(r => r.insertedId)).toEqual(['id-0', 'id-1', 'mine'])
      expect(fake.calls.flatMap(call => call.ids)).toEqual(['id-0', 'id-1', 'mine'])
      expect(n).toBe(2)
      const op = buildInsert({}, undefined, { createPk: () => 'x' })
      expect(op.generatedId).toBe(false)
      expect(op.fresh).toBe(false)
    } finally {
      await wb.close()
    }
  })

  it('the driver\'s default pkFactory is ours: ObjectIds, fresh', async () => {
    const client = new MongoClient('mongodb://127.0.0.1:1/')
    const pkFactory = client.db('x').options?.pkFactory
    expect(pkFactory).toBeDefined()
    const fake = new PkFakeDb({ pkFactory })
    const wb = new WriteBuffer(fake.db)
    try {
      const r = await loose(wb.collection('c')).insertOne({ a: 1 })
      expect(r.insertedId).toBeInstanceOf(ObjectId)
      expect(customPkFactory(pkFactory)).toBeUndefined()
      expect(customPkFactory({ createPk: () => 1 })).toBeDefined()
    } finally {
      await wb.close()
    }
  })

  it('a createPk that throws or returns nothing refuses that write alone', async () => {
    let calls = 0
    const fake = new PkFakeDb({
      pkFactory: {
        createPk: () => {
          calls++
          if (calls === 1) throw new Error('out of ids')
          return calls === 2 ? undefined : `id-${calls}`
        },
      },
    })
    const wb = new WriteBuffer(fake.db, { lingerMs: 5 })
    try {
      const c = loose(wb.collection('c'))
      const s = await Promise.all([c.insertOne({ a: 1 }), c.insertOne({ a: 2 }), c.insertOne({ a: 3 })].map(settle))
      expectInvalid(s[0] as never, /pkFactory\.createPk\(\) threw \(out of ids\)/)
      expectInvalid(s[1] as never, /pkFactory\.createPk\(\) returned undefined/)
      expect(s[2]).toEqual({ status: 'fulfilled', value: { insertedId: 'id-3' } })
    } finally {
      fake.fallback = apply
      await wb.close()
    }
  })
})

describe('6. request.writeSignal read after the response adds no socket listener', () => {
  let app: FastifyInstance | undefined
  afterEach(async () => { await app?.close() })

  it('many requests on one keep-alive connection: the socket\'s close listeners stay bounded', async () => {
    const fake = new FakeDb()
    app = Fastify()
    await app.register(writeBufferPlugin, { db: fake.db, connectTimeoutMs: 0 })
    const counts: number[] = []
    const late: AbortSignal[] = []
    app.addHook('onResponse', async request => { late.push(request.writeSignal) })
    app.get('/', async (request, reply) => {
      counts.push(request.raw.socket.listenerCount('close'))
      await reply.send('ok')
      late.push(request.writeSignal)
      return reply
    })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const { port } = app.server.address() as AddressInfo
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    try {
      const get = async (): Promise<void> => {
        const req = httpRequest({ host: '127.0.0.1', port, path: '/', agent })
        req.end()
        const [res] = await once(req, 'response') as [NodeJS.ReadableStream]
        res.resume()
        await once(res, 'end')
      }
      for (let i = 0; i < 40; i++) await get()
      await new Promise(resolve => setImmediate(resolve))
      expect(counts).toHaveLength(40)
      expect((counts.at(-1) ?? 0) - (counts[0] ?? 0)).toBeLessThanOrEqual(1)
      expect(late).toHaveLength(80)
      expect(late.every(s => !s.aborted)).toBe(true)
    } finally {
      agent.destroy()
    }
    await new Promise(resolve => setTimeout(resolve, 50))
    // the client went away after its responses: nothing of theirs aborts
    expect(late.every(s => !s.aborted)).toBe(true)
  })

  it('read while the handler runs, it still aborts when the client goes away', async () => {
    const fake = new FakeDb()
    app = Fastify()
    await app.register(writeBufferPlugin, { db: fake.db, connectTimeoutMs: 0 })
    let signal: AbortSignal | undefined
    let release!: () => void
    const released = new Promise<void>(resolve => { release = resolve })
    app.get('/wait', async request => {
      signal = request.writeSignal
      await released
      return 'late'
    })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const { port } = app.server.address() as AddressInfo
    const req = httpRequest({ host: '127.0.0.1', port, path: '/wait' })
    req.on('error', () => {})
    req.end()
    await until(() => signal !== undefined)
    expect(signal?.aborted).toBe(false)
    req.destroy()
    await until(() => signal?.aborted === true)
    expect(signal?.aborted).toBe(true)
    release()
  })
})
