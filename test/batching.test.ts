import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Db, MongoClient } from 'mongodb'
import { WriteBuffer } from '../src/index.js'
import { countWriteCommands, openDb } from './helpers.js'

let client: MongoClient
let db: Db
let commands: ReturnType<typeof countWriteCommands>

beforeAll(async () => {
  ({ client, db } = await openDb('batching'))
  commands = countWriteCommands(client)
})
afterAll(async () => { await client.close() })

describe('batching', () => {
  it('2,000 concurrent inserts → 2,000 documents in a handful of bulkWrites', async () => {
    const wb = new WriteBuffer(db, { maxBatchSize: 1000 })
    const events = wb.collection('events')
    const before = commands.counts.insert ?? 0
    const results = await Promise.all(Array.from({ length: 2000 }, (_, i) => events.insertOne({ i })))
    expect(results).toHaveLength(2000)
    expect(new Set(results.map(r => String(r.insertedId))).size).toBe(2000)
    expect(await db.collection('events').countDocuments()).toBe(2000)
    const sent = (commands.counts.insert ?? 0) - before
    expect(sent).toBeLessThanOrEqual(4)
    expect(wb.stats()).toMatchObject({ pending: 0, inFlight: 0, flushedOps: 2000, failedOps: 0 })
    expect(wb.stats().acknowledgedOps).toBe(2000) // flushedOps: its deprecated alias
    expect(wb.stats().batches).toBe(sent)
    await wb.close()
  })

  it('assigns _id before queuing and returns it', async () => {
    const wb = new WriteBuffer(db)
    const doc: { name: string, _id?: unknown } = { name: 'a' }
    const p = wb.collection('ids').insertOne(doc as never)
    expect(doc._id).toBeDefined()
    const { insertedId } = await p
    expect(insertedId).toBe(doc._id)
    expect(await db.collection('ids').findOne({ _id: insertedId as never })).toMatchObject({ name: 'a' })
    await wb.close()
  })

  it('a lone write is flushed by the interval, without flush()', async () => {
    const wb = new WriteBuffer(db, { lingerMs: 20 })
    const t0 = Date.now()
    await wb.collection('lone').insertOne({ x: 1 })
    expect(Date.now() - t0).toBeGreaterThanOrEqual(15)
    expect(await db.collection('lone').countDocuments()).toBe(1)
    await wb.close()
  })

  it('flushes by count before the interval elapses', async () => {
    const wb = new WriteBuffer(db, { maxBatchSize: 50, lingerMs: 60_000 })
    const c = wb.collection('bycount')
    await Promise.all(Array.from({ length: 50 }, (_, i) => c.insertOne({ i })))
    expect(await db.collection('bycount').countDocuments()).toBe(50)
    // 49 writes stay below the threshold and wait for the (long) interval or flush()
    const rest = Array.from({ length: 49 }, (_, i) => c.insertOne({ i }))
    await new Promise(resolve => setTimeout(resolve, 200))
    expect(wb.stats().pending).toBe(49)
    await wb.flush()
    await Promise.all(rest)
    expect(await db.collection('bycount').countDocuments()).toBe(99)
    await wb.close()
  })

  it('flushes and splits by bytes', async () => {
    const wb = new WriteBuffer(db, { maxBatchBytes: 64 * 1024, lingerMs: 60_000 })
    const c = wb.collection('bybytes')
    const big = 'x'.repeat(10 * 1024)
    await Promise.all(Array.from({ length: 20 }, (_, i) => c.insertOne({ i, big })))
    expect(await db.collection('bybytes').countDocuments()).toBe(20)
    // ~10 KiB each, 64 KiB per batch → at least 4 batches
    expect(wb.stats().batches).toBeGreaterThanOrEqual(4)
    await wb.close()
  })

  it('covers every write kind with driver-like results', async () => {
    const wb = new WriteBuffer(db)
    const c = wb.collection('kinds')
    await c.insertOne({ _id: 'a' as never, n: 1 })
    await c.insertOne({ _id: 'b' as never, n: 1 })
    const up = await c.updateOne({ _id: 'c' }, { $set: { n: 5 } }, { upsert: true })
    expect(up.upsertedId).toBe('c')
    expect(await c.updateOne({ _id: 'a' }, { $inc: { n: 1 } })).toEqual({})
    await c.updateMany({}, { $set: { seen: true } })
    await c.replaceOne({ _id: 'b' }, { n: 42 })
    await c.deleteOne({ _id: 'c' })
    const docs = await db.collection('kinds').find().sort({ _id: 1 }).toArray()
    expect(docs).toEqual([{ _id: 'a', n: 2, seen: true }, { _id: 'b', n: 42 }])
    await c.deleteMany({})
    expect(await db.collection('kinds').countDocuments()).toBe(0)
    await wb.close()
  })

  it('after a flush() the next lone write is still sent by the timer', async () => {
    const wb = new WriteBuffer(db, { lingerMs: 5 })
    const c = wb.collection('timer_after_flush')
    const first = c.insertOne({ n: 1 }) // arms the timer…
    await wb.flush() // …which flush() cancels
    await first
    await new Promise(resolve => setTimeout(resolve, 20))
    const lone = c.insertOne({ n: 2 })
    const settled = await Promise.race([lone.then(() => 'ok'), new Promise(resolve => setTimeout(resolve, 2000, 'stuck'))])
    expect(settled).toBe('ok')
    await wb.close()
  })

  it('publishes one diagnostics_channel message per bulkWrite, none per write', async () => {
    const { subscribe, unsubscribe } = await import('node:diagnostics_channel')
    const { BATCH_CHANNEL } = await import('../src/index.js')
    const seen: Array<{ collection: string, ops: number, durationMs: number }> = []
    const listener = (m: unknown): void => { seen.push(m as { collection: string, ops: number, durationMs: number }) }
    subscribe(BATCH_CHANNEL, listener)
    try {
      const wb = new WriteBuffer(db, { maxBatchSize: 100 })
      const c = wb.collection('telemetry')
      await Promise.all(Array.from({ length: 250 }, (_, i) => c.insertOne({ i })))
      expect(seen.map(m => m.ops).reduce((a, b) => a + b, 0)).toBe(250)
      expect(seen.length).toBe(wb.stats().batches)
      expect(seen.every(m => m.collection === 'telemetry' && m.durationMs >= 0)).toBe(true)
      await wb.close()
    } finally {
      unsubscribe(BATCH_CHANNEL, listener)
    }
  })
})
