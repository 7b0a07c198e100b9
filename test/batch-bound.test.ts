import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Db, MongoClient, ObjectId } from 'mongodb'
import { WriteBuffer, WriteRejectedError } from '../src/index.js'
import { openDb } from './helpers.js'
import { server } from './support/capabilities.js'

// A server's bound on writes per command, learned from the server itself (docs/server-behaviours.md: `hello` can overstate the batch bound):
// DocumentDB's hello says maxWriteBatchSize 100,000 and it refuses an insert of more than
// 25,000 statements (InvalidLength, "Write batch sizes must be between 1 and 25000"). The buffer
// keeps to the bound the refusal names from then on, and the writes of the refused command go
// again in batches the server takes: a duplicate key among them is rejected, not unknown.

let client: MongoClient
let db: Db

beforeAll(async () => { ({ client, db } = await openDb('batch_bound')) })
afterAll(async () => { await client.close() })

describe('the server\'s own bound on writes per command', () => {
  it('30,000 inserts in one take, a duplicate _id among them: every other one stored, the duplicate rejected 11000; stats says the bound the server keeps', async () => {
    const hello = await db.admin().command({ hello: 1 }) as { maxWriteBatchSize?: number }
    const wb = new WriteBuffer(db, { maxBatchSize: 99_999, maxPending: 100_000, lingerMs: 100 })
    const c = wb.collection<{ _id?: string | ObjectId, i?: number }>('many')
    await c.insertOne({ _id: 'taken' })
    const settled = await Promise.allSettled(Array.from({ length: 30_000 }, (_, i) => c.insertOne(i === 20_000 ? { _id: 'taken' } : { i })))
    const refused = settled.filter(s => s.status === 'rejected')
    expect(refused).toHaveLength(1)
    const reason = (settled[20_000] as PromiseRejectedResult).reason as WriteRejectedError
    expect(reason).toBeInstanceOf(WriteRejectedError)
    expect([reason.code, reason.outcome]).toEqual([11000, 'rejected'])
    expect(await db.collection('many').countDocuments()).toBe(30_000) // 'taken' + 29,999
    const bound = wb.stats().maxWriteBatchSize
    expect(bound).toBeDefined()
    expect(bound as number).toBeLessThanOrEqual(hello.maxWriteBatchSize ?? Infinity)
    // on DocumentDB the refusal taught it 25,000 (the hello said 100,000)
    if (server().engine === 'docdb') expect(bound).toBe(25_000)
    await wb.close()
  }, 120_000)
})
