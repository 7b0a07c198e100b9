import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Db, MongoClient } from 'mongodb'
import { WriteBuffer } from '../src/index.js'
import { openDb } from './helpers.js'

let client: MongoClient
let db: Db
const unhandled: unknown[] = []
const onUnhandled = (reason: unknown): void => { unhandled.push(reason) }

beforeAll(async () => {
  ({ client, db } = await openDb('fuzz'))
  process.on('unhandledRejection', onUnhandled)
})
afterAll(async () => {
  process.off('unhandledRejection', onUnhandled)
  await client.close()
})

/** Small deterministic PRNG so a failure can be replayed. */
function rng (seed: number): () => number {
  return () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff
    return seed / 0x7fffffff
  }
}

const cyclic: Record<string, unknown> = {}
cyclic.me = cyclic
const huge = 'x'.repeat(16 * 1024 * 1024 + 10)

type Call = (c: Record<string, (...args: unknown[]) => Promise<unknown>>) => Promise<unknown>
const BAD: Array<[string, Call]> = [
  ['string doc', c => c.insertOne!('doc')],
  ['number doc', c => c.insertOne!(42)],
  ['undefined doc', c => c.insertOne!(undefined)],
  ['array doc', c => c.insertOne!([{ a: 1 }])],
  ['Date doc', c => c.insertOne!(new Date())],
  ['Buffer doc', c => c.insertOne!(Buffer.from('x'))],
  ['$ key', c => c.insertOne!({ $set: { a: 1 } })],
  ['cyclic', c => c.insertOne!({ a: cyclic })],
  ['huge', c => c.insertOne!({ huge })],
  ['no-operator update', c => c.updateOne!({ a: 1 }, { a: 2 })],
  ['mixed update', c => c.updateOne!({ a: 1 }, { $set: { a: 2 }, b: 3 })],
  ['null update', c => c.updateMany!({ a: 1 }, null)],
  ['string filter', c => c.updateOne!('a', { $set: { a: 1 } })],
  ['array filter', c => c.deleteMany!([{ a: 1 }])],
  ['null filter', c => c.deleteOne!(null)],
  ['operator replacement', c => c.replaceOne!({ a: 1 }, { $inc: { a: 1 } })],
  ['bad upsert', c => c.updateOne!({ a: 1 }, { $set: { a: 1 } }, { upsert: 1 })],
  ['bad timeout', c => c.insertOne!({ a: 1 }, { timeoutMs: -5 })],
  ['bad options', c => c.insertOne!({ a: 1 }, 'fast')],
  ['empty pipeline', c => c.updateOne!({ a: 1 }, [])],
]

describe('fuzz: thousands of malformed calls mixed with valid ones', () => {
  it('every bad call gets a clear error, every good one persists, no unhandled rejection', async () => {
    const random = rng(20261122)
    const wb = new WriteBuffer(db, { lingerMs: 2, maxBatchSize: 500 })
    const c = wb.collection('fuzz') as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>
    const good: Array<Promise<unknown>> = []
    const bad: Array<[string, Promise<unknown>]> = []
    let marker = 0
    for (let i = 0; i < 4000; i++) {
      if (random() < 0.5) {
        const [label, call] = BAD[Math.floor(random() * BAD.length)] as [string, Call]
        const p = call(c)
        p.catch(() => {}) // handled now; inspected below (an unhandled one would be the test's own)
        bad.push([label, p])
      } else {
        const m = marker++
        const kind = random()
        const p = kind < 0.7
          ? c.insertOne!({ marker: m, big: BigInt(m), nested: { k: [m, String(m)] } })
          : c.insertOne!({ _id: `id-${m}`, marker: m }).then(() => c.updateOne!({ _id: `id-${m}` }, { $set: { seen: true } }))
        p.catch(() => {})
        good.push(p)
      }
      if (i % 500 === 0) {
        // invalid collection names throw synchronously, before any promise exists
        expect(() => wb.collection(random() < 0.5 ? 'bad$name' : '')).toThrow(TypeError)
        await new Promise(resolve => setImmediate(resolve))
      }
    }
    const badResults = await Promise.allSettled(bad.map(([, p]) => p))
    badResults.forEach((r, k) => {
      const label = (bad[k] as [string, unknown])[0]
      expect(r.status, label).toBe('rejected')
      const err = (r as PromiseRejectedResult).reason as { code?: string, message: string }
      expect(err, label).toBeInstanceOf(TypeError)
      expect(err.code, label).toBe('WRITE_BUFFER_INVALID_WRITE')
      expect(err.message.length, label).toBeGreaterThan(10)
      expect(err.message.length, label).toBeLessThan(300) // a clear message, never a dump of a huge value
    })
    const goodResults = await Promise.allSettled(good)
    expect(goodResults.filter(r => r.status === 'rejected')).toEqual([])
    expect(await db.collection('fuzz').countDocuments()).toBe(marker)
    await wb.close()
    // calls after close: rejected, never thrown, never unhandled
    const late = await Promise.allSettled([c.insertOne!({ a: 1 }), c.updateOne!({ a: 1 }, { $set: { a: 2 } }), c.deleteMany!({})])
    expect(late.every(r => r.status === 'rejected' && (r.reason as { code: string }).code === 'WRITE_BUFFER_CLOSED')).toBe(true)
    await new Promise(resolve => setTimeout(resolve, 50))
    expect(unhandled).toEqual([])
    expect(wb.stats().pending).toBe(0)
  }, 120_000)
})
