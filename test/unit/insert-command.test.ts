import { describe, expect, it } from 'vitest'
import { Db, MongoClient } from 'mongodb'
import { InsertCommand } from '../../src/mongo/insert-command.js'
import { buildInsert, buildUpdate } from '../../src/write/build-op.js'

// Which batches go as an insert command (src/mongo/insert-command.ts): only inserts, and only
// where the driver's retryable writes would add nothing — the buffer's own _id (a resend can
// only collide with itself) or a standalone server (no driver retries at all).

const generated = () => buildInsert({ a: 1 }, undefined)
const ownId = () => buildInsert({ _id: 'mine', a: 1 }, undefined)
const update = () => buildUpdate(false, { _id: 1 }, { $set: { a: 1 } }, undefined)

describe('InsertCommand.covers', () => {
  it('inserts with the buffer\'s generated _id: on any deployment', () => {
    expect(InsertCommand.covers([generated(), generated()], false)).toBe(true)
    expect(InsertCommand.covers([generated(), generated()], true)).toBe(true)
  })

  it('an insert with the caller\'s own _id: only on a standalone server (elsewhere the driver\'s retryable write keeps a resend exactly-once)', () => {
    expect(InsertCommand.covers([generated(), ownId()], false)).toBe(false)
    expect(InsertCommand.covers([generated(), ownId()], true)).toBe(true)
  })

  it('any other kind of write in the batch: never', () => {
    expect(InsertCommand.covers([generated(), update()], true)).toBe(false)
    expect(InsertCommand.covers([update()], true)).toBe(false)
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
