import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { BSON, type Db, type Document, type MongoClient } from 'mongodb'
import { WriteBuffer } from '../src/index.js'
import { openDb } from './helpers.js'
import { prng } from './support/prng.js'

/**
 * Coalescing must equal applying the writes one by one: random sequences of same-document
 * updates ($set, $inc, $unset, $max, $min, $addToSet with and without $each) go through the
 * buffer (queued together, so they coalesce) into one collection, and one by one through the
 * driver into another; the documents must end identical.
 */
const ROUNDS = Number(process.env.FWB_COALESCE_ROUNDS ?? 30)
const DOCS = 8
const WRITES_PER_DOC = 25

let client: MongoClient
let db: Db
beforeAll(async () => { ({ client, db } = await openDb('coalesce_prop')) })
afterAll(async () => { await client.close() })

describe('coalescing equals one-by-one', () => {
  it(`${ROUNDS} rounds × ${DOCS} documents × ${WRITES_PER_DOC} random updates: merged and unmerged collections end identical`, async () => {
    const random = prng(7)
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)] as T
    const num = (): number => Math.floor(random() * 20) - 5
    const date = (): Date => new Date(1_700_000_000_000 + Math.floor(random() * 10) * 60_000)
    const tag = (): string => pick(['a', 'b', 'c', 'd'])
    const update = (): Document => pick<() => Document>([
      () => ({ $set: { n: num() } }),
      () => ({ $inc: { n: num() } }),
      () => ({ $max: { n: num() } }),
      () => ({ $min: { n: num() } }),
      () => ({ $max: { d: date() } }),
      () => ({ $min: { d: date() } }),
      () => ({ $set: { d: date() } }),
      () => ({ $addToSet: { tags: tag() } }),
      () => ({ $addToSet: { tags: { $each: [tag(), tag()] } } }),
      () => ({ $unset: { tags: '' } }),
      () => ({ $max: { n: num() }, $addToSet: { tags: tag() } }),
      () => ({ $inc: { k: 1 }, $min: { d: date() } }),
    ])()
    let merges = 0
    // two collections for all rounds (creating one costs more than a round on some servers);
    // each round has documents of its own (_id = round * DOCS + i)
    const merged = db.collection('merged')
    const plain = db.collection('plain')
    for (let round = 0; round < ROUNDS; round++) {
      const base = round * DOCS
      const seed = Array.from({ length: DOCS }, (_, i) => ({ _id: base + i, n: 0, d: new Date(1_700_000_300_000), tags: ['a'] }))
      await merged.insertMany(seed.map(d => ({ ...d })) as never[])
      await plain.insertMany(seed as never[])
      const wb = new WriteBuffer(db)
      const c = wb.collection('merged')
      const sequence: Array<[number, Document]> = []
      for (let w = 0; w < DOCS * WRITES_PER_DOC; w++) sequence.push([base + Math.floor(random() * DOCS), update()])
      await Promise.all(sequence.map(([id, u]) => c.updateOne({ _id: id }, u)))
      merges += wb.stats().coalescedOps
      await wb.close()
      // one by one through the driver: in sequence per document (the order that matters), the
      // documents side by side (an update by _id touches its own document only)
      await Promise.all(Array.from({ length: DOCS }, async (_, i) => {
        for (const [id, u] of sequence) if (id === base + i) await plain.updateOne({ _id: id as never }, u)
      }))
      const range = { _id: { $gte: base, $lt: base + DOCS } }
      const a = await merged.find(range as never).sort({ _id: 1 }).toArray()
      const b = await plain.find(range as never).sort({ _id: 1 }).toArray()
      expect(BSON.EJSON.stringify(a), `round ${round}`).toBe(BSON.EJSON.stringify(b))
    }
    console.log(`coalescing property: ${ROUNDS * DOCS * WRITES_PER_DOC} updates, ${merges} coalesced, documents identical`)
    expect(merges).toBeGreaterThan(ROUNDS * DOCS * WRITES_PER_DOC / 4)
  }, 300_000)
})
