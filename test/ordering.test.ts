import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Db, MongoClient } from 'mongodb'
import { WriteBuffer } from '../src/index.js'
import { openDb } from './helpers.js'

let client: MongoClient
let db: Db

beforeAll(async () => { ({ client, db } = await openDb('ordering')) })
afterAll(async () => { await client.close() })

describe('same-target order', () => {
  for (const coalesce of [false, true]) {
    it(`200 un-awaited $set {v: i} on one document leave v = 199 (coalesce: ${String(coalesce)})`, async () => {
      // small batches and several in flight: the setup in which a naive buffer reorders
      const wb = new WriteBuffer(db, { coalesce, maxBatchSize: 16, maxInFlight: 4, lingerMs: 1 })
      const c = wb.collection(`set_${String(coalesce)}`)
      await c.insertOne({ _id: 1 as never, v: -1 })
      const writes = []
      for (let i = 0; i < 200; i++) writes.push(c.updateOne({ _id: 1 }, { $set: { v: i } }))
      await Promise.all(writes)
      expect(await db.collection(`set_${String(coalesce)}`).findOne({ _id: 1 as never })).toEqual({ _id: 1, v: 199 })
      await wb.close()
    })

    it(`500 un-awaited $inc leave n = 500 exactly (coalesce: ${String(coalesce)})`, async () => {
      const wb = new WriteBuffer(db, { coalesce, maxBatchSize: 64, maxInFlight: 4 })
      const c = wb.collection(`inc_${String(coalesce)}`)
      const writes = []
      for (let i = 0; i < 500; i++) writes.push(c.updateOne({ _id: 'counter' }, { $inc: { n: 1 } }, { upsert: true }))
      const results = await Promise.all(writes)
      expect(results.filter(r => r.upsertedId !== undefined)).toHaveLength(1)
      expect(await db.collection(`inc_${String(coalesce)}`).findOne({ _id: 'counter' as never })).toEqual({ _id: 'counter', n: 500 })
      await wb.close()
    })
  }

  it('insert, update, delete, re-insert of one _id apply in submission order', async () => {
    const wb = new WriteBuffer(db, { maxInFlight: 4 })
    const c = wb.collection('lifecycle')
    const all = []
    for (let k = 0; k < 50; k++) {
      all.push(c.insertOne({ _id: k as never, step: 'inserted' }))
      all.push(c.updateOne({ _id: k }, { $set: { step: 'updated' } }))
      all.push(c.deleteOne({ _id: k }))
      all.push(c.insertOne({ _id: k as never, step: 'again' }))
    }
    await Promise.all(all)
    const docs = await db.collection('lifecycle').find().toArray()
    expect(docs).toHaveLength(50)
    expect(docs.every(d => d.step === 'again')).toBe(true)
    await wb.close()
  })

  it('filters that differ only in key order are the same target', async () => {
    const wb = new WriteBuffer(db, { coalesce: false, maxInFlight: 4, maxBatchSize: 8 })
    const c = wb.collection('keyorder')
    await c.insertOne({ a: 1, b: 2, v: 0 })
    const writes = []
    for (let i = 1; i <= 60; i++) {
      writes.push(c.updateOne(i % 2 === 0 ? { a: 1, b: 2 } : { b: 2, a: 1 }, { $set: { v: i } }))
    }
    await Promise.all(writes)
    expect((await db.collection('keyorder').findOne({ a: 1 }))?.v).toBe(60)
    await wb.close()
  })

  it('ordered: true keeps order across different filters that hit one document', async () => {
    const wb = new WriteBuffer(db, { maxInFlight: 4, maxBatchSize: 8 })
    const c = wb.collection('strict', { ordered: true })
    await c.insertOne({ _id: 7 as never, name: 'x', v: 0 })
    const writes = []
    for (let i = 1; i <= 40; i++) {
      writes.push(c.updateOne(i % 2 === 0 ? { _id: 7 } : { name: 'x' }, { $set: { v: i } }))
    }
    await Promise.all(writes)
    expect((await db.collection('strict').findOne({ _id: 7 as never }))?.v).toBe(40)
    await wb.close()
  })

  it('5, Int32(5) and Long(5) are one _id, so one target', async () => {
    const { Int32, Long } = await import('mongodb')
    const wb = new WriteBuffer(db, { coalesce: false, maxInFlight: 4, maxBatchSize: 4 })
    const c = wb.collection('numeric_ids')
    await c.insertOne({ _id: 5 as never, v: 0 })
    const ids = [5, new Int32(5), Long.fromNumber(5)]
    const writes = []
    for (let i = 1; i <= 30; i++) writes.push(c.updateOne({ _id: ids[i % 3] }, { $set: { v: i } }))
    await Promise.all(writes)
    expect((await db.collection('numeric_ids').findOne({ _id: 5 as never }))?.v).toBe(30)
    await wb.close()
  })
})
