import { describe, expect, it } from 'vitest'
import { Db, Int32, MongoClient } from 'mongodb'
import { classify } from '../../src/mongo/driver-errors.js'
import { acknowledged, InsertCommand, InsertConcernError, InsertWriteErrors, INLINE_MAX_BYTES } from '../../src/mongo/insert-command.js'
import { DriverRetries } from '../../src/mongo/topology.js'
import { buildInsert, buildUpdate } from '../../src/write/build-op.js'
import { thrownBy } from '../support/thrown.js'

// Which batches go as one insert command (src/mongo/insert-command.ts; the Sender asks it only
// on a deployment where the driver never retries writes on its own): inserts only, and no
// more bytes than one command body safely carries.

const insert = (doc: Record<string, unknown> = { a: 1 }) => buildInsert(doc, undefined)
const update = () => buildUpdate(false, { _id: 1 }, { $set: { a: 1 } }, undefined)

describe('InsertCommand.covers', () => {
  it('inserts, the buffer\'s _id or the caller\'s: yes', () => {
    expect(InsertCommand.covers([insert(), insert({ _id: 'mine', a: 1 })])).toBe(true)
  })

  it('any other kind of write in the batch: no', () => {
    expect(InsertCommand.covers([insert(), update()])).toBe(false)
    expect(InsertCommand.covers([update()])).toBe(false)
  })

  it(`more than ${INLINE_MAX_BYTES} estimated bytes: no (a bulkWrite splits what one command body cannot carry)`, () => {
    const big = (): ReturnType<typeof insert> => insert({ s: 'x'.repeat(1024 * 1024) })
    expect(InsertCommand.covers([big(), big(), big()])).toBe(true)
    expect(InsertCommand.covers([big(), big(), big(), big()])).toBe(false)
  })
})

describe('InsertCommand.for', () => {
  it('a driver Db gets one; anything else (a stub, a wrapper object) sends bulkWrites', () => {
    const client = new MongoClient('mongodb://127.0.0.1:9/x') // never connected
    expect(InsertCommand.for(client.db('x'), undefined, 5000)).toBeInstanceOf(InsertCommand)
    const stub = { collection: () => ({}), databaseName: 'x' } as unknown as Db
    expect(InsertCommand.for(stub, undefined, 5000)).toBeUndefined()
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

  it('refused writes: InsertWriteErrors with numeric indexes and codes, however the reply was decoded (promoteValues: false gives Int32)', () => {
    const err = thrownBy(() => acknowledged({ ok: 1, n: 1, writeErrors: [{ index: new Int32(1), code: new Int32(11000), errmsg: 'E11000 duplicate key' }] }))
    expect(err).toBeInstanceOf(InsertWriteErrors)
    expect((err as InsertWriteErrors).writeErrors).toEqual([{ index: 1, code: 11000, errmsg: 'E11000 duplicate key' }])
    expect((err as InsertWriteErrors).result.getWriteConcernError()).toBeUndefined()
  })

  it('a write concern error left in the reply (a driver that does not throw it) is not acknowledged: unknown, not retried, as the driver\'s MongoWriteConcernError', () => {
    const err = thrownBy(() => acknowledged({ ok: 1, n: 1, writeConcernError: { code: 64, errmsg: 'waiting for replication timed out' } }))
    expect(err).toBeInstanceOf(InsertConcernError)
    expect(classify(err, false)).toMatchObject({ outcome: 'unknown', transient: false })
    const both = thrownBy(() => acknowledged({ ok: 1, n: 1, writeErrors: [{ index: 0, code: 11000 }], writeConcernError: { code: 64 } }))
    expect(both).toBeInstanceOf(InsertWriteErrors)
    expect((both as InsertWriteErrors).result.getWriteConcernError()).toEqual({ code: 64 })
  })
})
