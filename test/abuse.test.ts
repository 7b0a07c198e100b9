import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Db, MongoClient } from 'mongodb'
import { InvalidWriteError, WriteBuffer } from '../src/index.js'
import { openDb } from './helpers.js'

let client: MongoClient
let db: Db

beforeAll(async () => { ({ client, db } = await openDb('abuse')) })
afterAll(async () => { await client.close() })

const cyclic: Record<string, unknown> = { a: 1 }
cyclic.self = cyclic

describe('bad input is rejected at once and never poisons a batch', () => {
  it('malformed writes among good ones in the same tick: good ones persist, bad ones name the value', async () => {
    const wb = new WriteBuffer(db, { lingerMs: 20 })
    const c = wb.collection('mix')
    const any = c as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>
    const bad: Array<[string, () => Promise<unknown>, RegExp]> = [
      ['non-object doc', () => any.insertOne!('hello'), /document must be a plain object, got "hello"/],
      ['array doc', () => any.insertOne!([1, 2]), /got an array of length 2/],
      ['null doc', () => any.insertOne!(null), /got null/],
      ['$ key in insert', () => any.insertOne!({ $where: 'x' }), /\$where/],
      ['update without operators', () => any.updateOne!({ _id: 1 }, { v: 1 }), /only update operators/],
      ['empty update', () => any.updateOne!({ _id: 1 }, {}), /only update operators/],
      ['operator with non-object', () => any.updateOne!({ _id: 1 }, { $set: 5 }), /\$set needs an object, got 5/],
      ['replacement with operators', () => any.replaceOne!({ _id: 1 }, { $set: { a: 1 } }), /replacement must not contain/],
      ['filter not an object', () => any.deleteOne!('x'), /filter must be a plain object/],
      ['cyclic document', () => any.insertOne!({ cyclic }), /cannot be serialized/],
      ['document over 16 MiB', () => any.insertOne!({ big: 'x'.repeat(17 * 1024 * 1024) }), /over the 16 MiB/],
      ['upsert not boolean', () => any.updateOne!({ _id: 1 }, { $set: { a: 1 } }, { upsert: 'yes' }), /upsert must be a boolean/],
      ['bad signal', () => any.insertOne!({ a: 1 }, { signal: 'nope' }), /signal must be an AbortSignal/],
      ['forged BSON type from JSON', () => any.insertOne!(JSON.parse('{"_id":{"_bsontype":"ObjectId"}}')), /cannot be serialized/],
      ['huge RegExp', () => any.insertOne!({ re: new RegExp('x'.repeat(17 * 1024 * 1024)) }), /over the 16 MiB/],
    ]
    const good = Array.from({ length: 50 }, (_, i) => c.insertOne({ i }))
    const outcomes = await Promise.allSettled(bad.map(([, call]) => call()))
    const goodResults: Array<PromiseSettledResult<unknown>> = await Promise.allSettled(good)
    // {i: 0} is a different target than the insert's {_id}: only order it by awaiting
    goodResults.push(...await Promise.allSettled([c.updateOne({ i: 0 }, { $set: { touched: true } })]))
    bad.forEach(([label, , pattern], k) => {
      const o = outcomes[k] as PromiseSettledResult<unknown>
      expect(o.status, label).toBe('rejected')
      const err = (o as PromiseRejectedResult).reason as InvalidWriteError
      expect(err, label).toBeInstanceOf(TypeError)
      expect(err.code, label).toBe('WRITE_BUFFER_INVALID_WRITE')
      expect(err.message, label).toMatch(pattern)
    })
    expect(goodResults.every(r => r.status === 'fulfilled')).toBe(true)
    expect(await db.collection('mix').countDocuments()).toBe(50)
    expect(await db.collection('mix').countDocuments({ touched: true })).toBe(1)
    expect(wb.stats().batches).toBeLessThanOrEqual(3)
    await wb.close()
  })

  it('invalid collection names throw a TypeError naming the value', () => {
    const wb = new WriteBuffer(db)
    for (const name of ['', 'a$b', 'system.users', 'x\0y', 42, null]) {
      expect(() => wb.collection(name as string)).toThrow(TypeError)
    }
    expect(() => wb.collection('a$b')).toThrow(/invalid collection name: "a\$b"/)
  })

  it('a _id that the server refuses fails alone', async () => {
    const wb = new WriteBuffer(db, { lingerMs: 20 })
    const c = wb.collection('badid')
    const results = await Promise.allSettled([
      c.insertOne({ _id: [1, 2] as never }), // arrays are not allowed as _id
      c.insertOne({ ok: true }),
    ])
    expect(results[0]?.status).toBe('rejected')
    expect(results[1]?.status).toBe('fulfilled')
    expect(await db.collection('badid').countDocuments({ ok: true })).toBe(1)
    await wb.close()
  })
})
