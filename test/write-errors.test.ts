import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MongoClient, type Db } from 'mongodb'
import { WriteBuffer, WriteRejectedError, WriteBufferError } from '../src/index.js'
import { mongoUri, openDb } from './helpers.js'
import { lacks } from './support/capabilities.js'

let client: MongoClient
let db: Db

beforeAll(async () => { ({ client, db } = await openDb('write_errors')) })
afterAll(async () => { await client.close() })

describe('a failed write rejects only its own caller', () => {
  it.skipIf(lacks('perStatementInsertErrors'))('duplicate keys among 500 inserts: exactly those callers get 11000, the rest persist [needs per-statement insert errors]', async () => {
    await db.collection('users').createIndex({ email: 1 }, { unique: true })
    const wb = new WriteBuffer(db, { maxBatchSize: 1000 })
    const users = wb.collection('users')
    const dupes = new Set([17, 99, 250, 251, 499])
    const settled = await Promise.allSettled(Array.from({ length: 500 }, (_, i) =>
      users.insertOne({ email: dupes.has(i) ? `user${i - 1}@x.io` : `user${i}@x.io`, i })))
    const rejected = settled.flatMap((s, i) => s.status === 'rejected' ? [i] : [])
    // 250 duplicates 249; 251 duplicates 250's email only if 250 was written — it was not (250 itself is a dupe)
    const expected = [17, 99, 250, 499]
    expect(rejected).toEqual(expected)
    for (const i of expected) {
      const reason = (settled[i] as PromiseRejectedResult).reason as WriteRejectedError
      expect(reason).toBeInstanceOf(WriteRejectedError)
      expect(reason.code).toBe(11000)
      expect(reason.message).toMatch(/duplicate key/i)
      expect(reason.outcome).toBe('rejected')
      expect(reason.attempts).toBe(1)
    }
    expect(await db.collection('users').countDocuments()).toBe(496)
    expect(wb.stats()).toMatchObject({ failedOps: 4, flushedOps: 496, pending: 0 })
    await wb.close()
  })

  it('a whole failed batch rejects every caller in it (nobody hangs)', async () => {
    const other = new MongoClient(mongoUri(), { serverSelectionTimeoutMS: 500 })
    await other.connect()
    const wb = new WriteBuffer(other.db(db.databaseName), { lingerMs: 50, retry: { maxAttempts: 1 } })
    const c = wb.collection('doomed')
    const writes = Array.from({ length: 20 }, (_, i) => c.insertOne({ i }))
    await other.close() // the client goes away before the flush
    const settled = await Promise.allSettled(writes)
    expect(settled.every(s => s.status === 'rejected')).toBe(true)
    for (const s of settled) {
      const err = (s as PromiseRejectedResult).reason as WriteBufferError
      expect(err).toBeInstanceOf(WriteBufferError)
      expect(err.code).toBe('WRITE_BUFFER_BATCH_FAILED')
      expect(err.outcome).toBe('not-sent')
    }
    expect(await db.collection('doomed').countDocuments()).toBe(0)
    expect(wb.stats().pending).toBe(0)
    await wb.close()
  })
})
