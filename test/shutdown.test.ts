import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Db, MongoClient } from 'mongodb'
import { WriteBuffer, WriteBufferError } from '../src/index.js'
import { openDb } from './helpers.js'

let client: MongoClient
let db: Db

beforeAll(async () => { ({ client, db } = await openDb('shutdown')) })
afterAll(async () => { await client.close() })

describe('flush() and close()', () => {
  it('close() with 1,000 un-awaited writes persists them all; later writes reject WRITE_BUFFER_CLOSED', async () => {
    const wb = new WriteBuffer(db, { lingerMs: 60_000 })
    const c = wb.collection('drain')
    const writes = Array.from({ length: 1000 }, (_, i) => c.insertOne({ i }))
    await wb.close()
    expect(await db.collection('drain').countDocuments()).toBe(1000)
    expect((await Promise.allSettled(writes)).every(r => r.status === 'fulfilled')).toBe(true)
    const late = await c.insertOne({ late: true }).catch((e: unknown) => e)
    expect(late).toBeInstanceOf(WriteBufferError)
    expect(late).toMatchObject({ code: 'WRITE_BUFFER_CLOSED', outcome: 'not-sent' })
    expect(await db.collection('drain').countDocuments({ late: true })).toBe(0)
    expect(await wb.close()).toBeUndefined() // idempotent
  })

  it('flush() resolves when every write queued before it is acknowledged, not later ones', async () => {
    const wb = new WriteBuffer(db, { lingerMs: 60_000, maxInFlight: 1 })
    const c = wb.collection('flush')
    let firstDone = 0
    const first = Array.from({ length: 100 }, (_, i) => c.insertOne({ i }).then(() => { firstDone++ }))
    const flushed = wb.flush()
    await flushed
    expect(firstDone).toBe(100)
    await Promise.all(first)
    expect(await wb.flush()).toBeUndefined()
    await wb.close()
  })

  it('an idle buffer arms no timer (nothing keeps the process alive)', async () => {
    const wb = new WriteBuffer(db, { lingerMs: 5 })
    await wb.collection('idle').insertOne({ a: 1 })
    const timers = (process as unknown as { getActiveResourcesInfo: () => string[] }).getActiveResourcesInfo()
      .filter(r => r === 'Timeout')
    // the driver keeps its own monitoring timers; ours must not add a live one when idle
    const before = timers.length
    await new Promise(resolve => setTimeout(resolve, 20))
    const after = (process as unknown as { getActiveResourcesInfo: () => string[] }).getActiveResourcesInfo()
      .filter(r => r === 'Timeout').length
    expect(after).toBeLessThanOrEqual(before)
    await wb.close()
  })
})
