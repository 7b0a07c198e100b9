import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Db, MongoClient } from 'mongodb'
import { WriteBuffer } from '../src/index.js'
import { openDb } from './helpers.js'
import { server } from './support/capabilities.js'

// A poison the server drops the connection on (docs/server-behaviours.md: a poison can close the connection): FerretDB 1.24 closes the connection
// on a document holding NaN, which MongoDB and DocumentDB store. Resent whole, the batch hit the
// same wall until its attempts ran out and every mate ended `unknown` (499 of 1,000, 780 of
// 99,999 good writes). Closed twice while the server answers a ping between them, the batch is
// isolated like a refused one: the mates are stored, the culprit ends `unknown` alone. On a
// server that stores NaN the same writes are simply acknowledged: the test holds on every engine.

let client: MongoClient
let db: Db

beforeAll(async () => { ({ client, db } = await openDb('poison_close')) })
afterAll(async () => { await client.close() })

describe('a document the server closes the connection on fails alone', () => {
  for (const n of [1, 2, 1_000, 99_999]) {
    it(`{ a: NaN } among ${n.toLocaleString('en')} inserts: every mate stored and told so; the NaN one stored, or told unknown and absent`, async () => {
      const wb = new WriteBuffer(db, { maxTimeMS: 500, maxPending: 100_000, writeTimeoutMs: 0 })
      const name = `nan_${n}`
      const c = wb.collection<{ i: number, a?: number }>(name)
      const bad = Math.floor(n / 2)
      const settled = await Promise.allSettled(Array.from({ length: n }, (_, i) => c.insertOne(i === bad ? { i, a: NaN } : { i })))
      const stored = new Set((await db.collection<{ i: number }>(name).find({}, { projection: { i: 1 } }).toArray()).map(d => d.i))
      const lost: number[] = []
      for (let i = 0; i < n; i++) {
        if (i === bad) continue
        if (settled[i]?.status !== 'fulfilled' || !stored.has(i)) lost.push(i)
      }
      expect(lost.length, `good writes not stored or not told so (${server().name} ${server().version}); first: ${String((settled[lost[0] ?? 0] as PromiseRejectedResult).reason)}`).toBe(0)
      const culprit = settled[bad] as PromiseSettledResult<unknown>
      if (culprit.status === 'fulfilled') {
        expect(stored.has(bad)).toBe(true)
      } else {
        expect((culprit.reason as { outcome?: string }).outcome).toBe('unknown')
        expect(stored.has(bad)).toBe(false)
      }
      await wb.close()
    }, 180_000)
  }
})
