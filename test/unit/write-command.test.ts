import { describe, expect, it } from 'vitest'
import { Db, Int32, MongoClient } from 'mongodb'
import { readFailure } from '../../src/mongo/driver-errors.js'
import { acknowledged, commandOf, CommandConcernError, CommandWriteErrors, INLINE_MAX_BYTES, WriteCommand } from '../../src/mongo/write-command.js'
import type { ServerIdentity } from '../../src/mongo/server-identity.js'
import { BULK_WRITE, COMMAND } from '../../src/buffer/batch.js'
import { Wire } from '../../src/buffer/wire.js'
import { Tracing } from '../../src/tracing.js'
import { DriverRetries } from '../../src/mongo/topology.js'
import { buildDelete, buildInsert, buildReplace, buildUpdate } from '../../src/write/build-op.js'
import { thrownBy } from '../support/thrown.js'

// Which batches go as one insert command (src/mongo/insert-command.ts; the Sender asks it only
// on a deployment where the driver never retries writes on its own): inserts only, and no
// more bytes than one command body safely carries.

const insert = (doc: Record<string, unknown> = { a: 1 }) => buildInsert(doc, undefined)
const update = () => buildUpdate(false, { _id: 1 }, { $set: { a: 1 } }, undefined)

describe('WriteCommand.covers', () => {
  it('inserts, the buffer\'s _id or the caller\'s: yes', () => {
    expect(WriteCommand.covers([insert(), insert({ _id: 'mine', a: 1 })], true)).toBe(true)
  })

  it('any other kind of write in the batch: no', () => {
    expect(WriteCommand.covers([insert(), update()], true)).toBe(false)
    expect(WriteCommand.covers([update()], true)).toBe(false)
  })

  it(`more than ${INLINE_MAX_BYTES} estimated bytes: no (a bulkWrite splits what one command body cannot carry)`, () => {
    const big = (): ReturnType<typeof insert> => insert({ s: 'x'.repeat(1024 * 1024) })
    expect(WriteCommand.covers([big(), big(), big()], true)).toBe(true)
    expect(WriteCommand.covers([big(), big(), big(), big()], true)).toBe(false)
  })
})

describe('WriteCommand.for', () => {
  it('a driver Db gets one; anything else (a stub, a wrapper object) sends bulkWrites', () => {
    const client = new MongoClient('mongodb://127.0.0.1:9/x') // never connected
    expect(WriteCommand.for(client.db('x'), undefined, 5000)).toBeInstanceOf(WriteCommand)
    const stub = { collection: () => ({}), databaseName: 'x' } as unknown as Db
    expect(WriteCommand.for(stub, undefined, 5000)).toBeUndefined()
  })
})

describe('DriverRetries.mayRetry: where inserts may go as a command (never where the driver could resend a write itself)', () => {
  const dbWith = (client: unknown): Db => ({ client, collection: () => ({}), databaseName: 'x' }) as unknown as Db
  const servers = (type: string): unknown => ({ description: { servers: new Map([['a', { type }]]) } })

  it('a standalone server: no; a replica set or sharded cluster: yes; not known yet: yes (it may be a replica set)', () => {
    expect(new DriverRetries(dbWith({ options: {}, topology: servers('Standalone') })).mayRetry()).toBe(false)
    expect(new DriverRetries(dbWith({ options: {}, topology: servers('RSPrimary') })).mayRetry()).toBe(true)
    expect(new DriverRetries(dbWith({ options: {}, topology: servers('Mongos') })).mayRetry()).toBe(true)
    expect(new DriverRetries(dbWith({ options: {}, topology: servers('Unknown') })).mayRetry()).toBe(true)
  })

  it('retryWrites: false: no, on any deployment', () => {
    expect(new DriverRetries(dbWith({ options: { retryWrites: false }, topology: servers('RSPrimary') })).mayRetry()).toBe(false)
  })
})

describe('reading an insert command\'s reply as a bulkWrite\'s answer', () => {
  it('acknowledged: no upserts', () => {
    expect(acknowledged({ ok: 1, n: 2 })).toEqual({ upsertedIds: {} })
  })

  it('refused writes: CommandWriteErrors with numeric indexes and codes, however the reply was decoded (promoteValues: false gives Int32)', () => {
    const err = thrownBy(() => acknowledged({ ok: 1, n: 1, writeErrors: [{ index: new Int32(1), code: new Int32(11000), errmsg: 'E11000 duplicate key' }] }))
    expect(err).toBeInstanceOf(CommandWriteErrors)
    expect((err as CommandWriteErrors).writeErrors).toEqual([{ index: 1, code: 11000, errmsg: 'E11000 duplicate key' }])
    expect((err as CommandWriteErrors).result.getWriteConcernError()).toBeUndefined()
  })

  it('a write concern error left in the reply (a driver that does not throw it) is not acknowledged: unknown, not retried, as the driver\'s MongoWriteConcernError', () => {
    const err = thrownBy(() => acknowledged({ ok: 1, n: 1, writeConcernError: { code: 64, errmsg: 'waiting for replication timed out' } }))
    expect(err).toBeInstanceOf(CommandConcernError)
    expect(readFailure(err).classify(false)).toMatchObject({ outcome: 'unknown', transient: false })
    const both = thrownBy(() => acknowledged({ ok: 1, n: 1, writeErrors: [{ index: 0, code: 11000 }], writeConcernError: { code: 64 } }))
    expect(both).toBeInstanceOf(CommandWriteErrors)
    expect((both as CommandWriteErrors).result.getWriteConcernError()).toEqual({ code: 64 })
  })
})

describe('commandOf: a batch\'s writes as the write command its bulkWrite would be', () => {
  const writes = (...ops: Array<ReturnType<typeof buildInsert>>) => ops

  it('updates: q, u, upsert, multi (only when true, as the driver sends it) and the per-statement options, as the driver builds them', () => {
    const one = buildUpdate(false, { _id: 1 }, { $set: { a: 1 } }, { upsert: true, arrayFilters: [{ 'x.k': 1 }], hint: { _id: 1 } })
    const replace = buildReplace({ _id: 2 }, { b: 2 }, undefined)
    expect(commandOf('c', writes(one, replace))).toEqual({
      update: 'c',
      updates: [
        { q: { _id: 1 }, u: { $set: { a: 1 } }, upsert: true, arrayFilters: [{ 'x.k': 1 }], hint: { _id: 1 } },
        { q: { _id: 2 }, u: { b: 2 } },
      ],
    })
    expect(commandOf('c', writes(buildUpdate(true, { a: 1 }, { $inc: { n: 1 } }, undefined)))).toEqual({ update: 'c', updates: [{ q: { a: 1 }, u: { $inc: { n: 1 } }, multi: true }] })
  })

  it('deletes: limit 1 for deleteOne, 0 for deleteMany; inserts: the documents', () => {
    expect(commandOf('c', writes(buildDelete(false, { _id: 1 }, { collation: { locale: 'en' } })))).toEqual({ delete: 'c', deletes: [{ q: { _id: 1 }, limit: 1, collation: { locale: 'en' } }] })
    expect(commandOf('c', writes(buildDelete(true, { a: 1 }, undefined)))).toEqual({ delete: 'c', deletes: [{ q: { a: 1 }, limit: 0 }] })
    expect(commandOf('c', writes(buildInsert({ _id: 7 }, undefined)))).toEqual({ insert: 'c', documents: [{ _id: 7 }] })
  })

  it('two commands\' writes in one batch are a bug, never sent as one: TypeError', () => {
    expect(() => commandOf('c', writes(buildInsert({ _id: 7 }, undefined), update()))).toThrow(TypeError)
  })

  it('an update reply\'s upserted ([{ index, _id }]) is read as a bulkWrite\'s upsertedIds, beside refused writes too', () => {
    expect(acknowledged({ ok: 1, n: 2, upserted: [{ index: new Int32(1), _id: 'x' }] })).toEqual({ upsertedIds: { 1: 'x' } })
    const err = thrownBy(() => acknowledged({ ok: 1, n: 1, upserted: [{ index: 0, _id: 'y' }], writeErrors: [{ index: 1, code: 11000 }] }))
    expect((err as CommandWriteErrors).result.upsertedIds).toEqual({ 0: 'y' })
  })
})

describe('Wire#routeOf: the driver resends on its own only where that is exactly-once (MongoDB)', () => {
  const client = new MongoClient('mongodb://127.0.0.1:9/x') // never connected
  const db = client.db('x')
  const retries = (mayRetry: boolean, standalone: boolean) => ({ mayRetry: () => mayRetry, mayHaveRetried: () => mayRetry && !standalone, standalone: () => standalone }) as unknown as DriverRetries
  const identity = (known: boolean | undefined) => {
    let asked = 0
    return { knownMongoDB: () => known, isMongoDB: async () => { asked++; return known === true }, asked: () => asked }
  }
  const wire = (r: DriverRetries, id: ReturnType<typeof identity>) =>
    new Wire({ writeConcern: undefined, maxTimeMS: 5000 }, r, id as unknown as ServerIdentity, new Tracing('x', undefined), WriteCommand.for(db, undefined, 5000))
  const ups = [update()]
  const ins = [insert()]

  it('a replica set not known to be MongoDB (yet): every kind as a command, the driver never resends, batches bounded to one command body; who the server is, asked once', () => {
    const id = identity(undefined)
    const w = wire(retries(true, false), id)
    expect([w.routeOf(ups), w.routeOf(ins)]).toEqual([COMMAND, COMMAND])
    expect(w.mayHaveRetried(COMMAND)).toBe(false)
    expect(w.mayResend(COMMAND)).toBe(false)
    expect(w.commandMaxBytes()).toBe(INLINE_MAX_BYTES)
    expect(id.asked()).toBeGreaterThan(0)
    const notMongo = wire(retries(true, false), identity(false))
    expect([notMongo.routeOf(ups), notMongo.routeOf(ins)]).toEqual([COMMAND, COMMAND])
  })

  it('there, a lone write over 4 MiB goes as a command too (review): a bulkWrite would let the driver resend it', () => {
    const w = wire(retries(true, false), identity(false))
    const big = buildUpdate(false, { _id: 1 }, { $set: { s: 'x'.repeat(5 * 1024 * 1024) } }, undefined)
    expect(w.routeOf([big])).toBe(COMMAND)
    expect(w.routeOf([big, update()])).toBe(BULK_WRITE) // never made: batches are bounded to 4 MiB there (commandMaxBytes)
  })

  it('a replica set known to be MongoDB: bulkWrites, whose errors may answer the driver\'s second attempt', () => {
    const w = wire(retries(true, false), identity(true))
    expect([w.routeOf(ups), w.routeOf(ins)]).toEqual([BULK_WRITE, BULK_WRITE])
    expect(w.mayHaveRetried(BULK_WRITE)).toBe(true)
    expect(w.mayResend(BULK_WRITE)).toBe(true)
    expect(w.commandMaxBytes()).toBeUndefined()
  })

  it('a standalone server (or retryWrites off): inserts as the insert command, the rest as bulkWrites, none resent by the driver', () => {
    const w = wire(retries(false, true), identity(undefined))
    expect([w.routeOf(ups), w.routeOf(ins)]).toEqual([BULK_WRITE, COMMAND])
    expect(w.mayHaveRetried(BULK_WRITE)).toBe(false)
    expect(w.mayResend(BULK_WRITE)).toBe(false)
    expect(w.commandMaxBytes()).toBeUndefined()
  })
})
