import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Db, MongoClient } from 'mongodb'
import { WriteBuffer, WriteBufferError } from '../src/index.js'
import { openDb } from './helpers.js'

let client: MongoClient
let db: Db

beforeAll(async () => { ({ client, db } = await openDb('backpressure')) })
afterAll(async () => { await client.close() })

describe('a full queue', () => {
  it("onFull: 'reject' answers WRITE_BUFFER_FULL at once and keeps the rest", async () => {
    const wb = new WriteBuffer(db, { maxPending: 100, onFull: 'reject', lingerMs: 50 })
    const c = wb.collection('reject')
    const settled = await Promise.allSettled(Array.from({ length: 150 }, (_, i) => c.insertOne({ i })))
    const full = settled.filter(s => s.status === 'rejected').map(s => (s as PromiseRejectedResult).reason as WriteBufferError)
    expect(full).toHaveLength(50)
    expect(full.every(e => e.code === 'WRITE_BUFFER_FULL' && e.outcome === 'not-sent' && e.statusCode === 503)).toBe(true)
    expect(await db.collection('reject').countDocuments()).toBe(100)
    await wb.close()
  })

  it("onFull: 'wait' holds writes until there is room, then writes them all", async () => {
    const wb = new WriteBuffer(db, { maxPending: 50, maxBatchSize: 20, lingerMs: 1 })
    const c = wb.collection('wait')
    let maxPending = 0
    const writes = Array.from({ length: 400 }, (_, i) => c.insertOne({ i }).then(r => { maxPending = Math.max(maxPending, wb.stats().pending); return r }))
    expect(wb.stats().pending).toBe(50)
    expect(wb.stats().waiting).toBe(350)
    await Promise.all(writes)
    expect(maxPending).toBeLessThanOrEqual(50)
    expect(await db.collection('wait').countDocuments()).toBe(400)
    await wb.close()
  })

  it('a waiting write honours its AbortSignal', async () => {
    const wb = new WriteBuffer(db, { maxPending: 1, lingerMs: 30 })
    const c = wb.collection('abort')
    const first = c.insertOne({ n: 1 })
    const ac = new AbortController()
    const second = c.insertOne({ n: 2 }, { signal: ac.signal })
    ac.abort()
    await expect(second).rejects.toMatchObject({ code: 'WRITE_BUFFER_ABORTED', outcome: 'not-sent' })
    await first
    await wb.flush()
    expect(await db.collection('abort').find().project({ _id: 0 }).toArray()).toEqual([{ n: 1 }])
    await wb.close()
  })

  it('a queued write aborted before its flush is dropped and its caller told', async () => {
    const wb = new WriteBuffer(db, { lingerMs: 50 })
    const c = wb.collection('abort_queued')
    const ac = new AbortController()
    const dropped = c.insertOne({ n: 'dropped' }, { signal: ac.signal })
    const kept = c.insertOne({ n: 'kept' })
    ac.abort()
    await expect(dropped).rejects.toMatchObject({ code: 'WRITE_BUFFER_ABORTED' })
    await kept
    expect(await db.collection('abort_queued').find().project({ _id: 0 }).toArray()).toEqual([{ n: 'kept' }])
    await wb.close()
  })
})
