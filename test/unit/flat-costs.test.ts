import { describe, expect, it } from 'vitest'
import { BSON, Decimal128, Long, ObjectId } from 'mongodb'
import { targetOfId } from '../../src/write/target.js'
import { harness, HEAVY } from './harness.js'
import { resolveWith, settle } from './fake-db.js'

/** The `v` each bulkWrite set on document 1, in the order the fake applied them. */
function appliedOrder (calls: Array<{ bodies: Array<Record<string, unknown>> }>): number[] {
  return calls.flatMap(c => c.bodies.map(b => ((b.update as { $set?: { v?: number } } | undefined)?.$set?.v) as number))
}

describe('writes parked behind the write holding their document', () => {
  it('go one by one in submission order when they cannot merge, and the take never walks them again', async () => {
    const { fake, c } = harness({ coalesce: false })
    const writes = Array.from({ length: 60 }, (_, v) => c.updateOne({ _id: 1 }, { $set: { v } }, { upsert: true }))
    await Promise.all(writes)
    expect(appliedOrder(fake.calls)).toEqual(Array.from({ length: 60 }, (_, v) => v))
    expect(fake.docs('c')[0]?.v).toBe(59)
  })

  it('merge into their new holder when they can (coalescing on): fewer statements, same final state', async () => {
    const { fake, c } = harness()
    const first = c.updateOne({ _id: 1 }, { $set: { v: 0 } }, { upsert: true })
    await Promise.resolve() // the first goes alone; the rest park behind it
    const rest = Array.from({ length: 40 }, (_, i) => c.updateOne({ _id: 1 }, { $set: { v: i + 1 } }))
    await Promise.all([first, ...rest])
    expect(fake.calls.length).toBeLessThanOrEqual(3)
    expect(fake.docs('c')[0]?.v).toBe(40)
  })

  it('an aborted or expired write among them leaves the others in order; none is stranded', async () => {
    const { fake, c } = harness({ coalesce: false })
    const ac = new AbortController()
    const writes = Array.from({ length: 30 }, (_, v) => settle(c.updateOne({ _id: 1 }, { $set: { v } },
      v === 10 ? { upsert: true, signal: ac.signal } : v === 1 ? { upsert: true, signal: ac.signal } : { upsert: true })))
    await Promise.resolve()
    ac.abort() // 1 is the head waiting next when the first returns, 10 is parked deeper
    const results = await Promise.all(writes)
    const aborted = results.flatMap((r, v) => r.status === 'rejected' ? [v] : [])
    expect(aborted.every(v => v === 1 || v === 10)).toBe(true)
    expect(appliedOrder(fake.calls)).toEqual(Array.from({ length: 30 }, (_, v) => v).filter(v => !aborted.includes(v)))
  })
})

describe('the server bounds a batch', () => {
  it("maxBatchSize is a ceiling: no batch carries as many writes as the server's maxWriteBatchSize (hello), so one batch stays one command", async () => {
    const { fake, c } = harness({ maxBatchSize: 1000 })
    const servers = (fake.client as { topology: { description: { servers: Map<string, Record<string, unknown>> } } }).topology.description.servers
    for (const server of servers.values()) server.maxWriteBatchSize = 25 // DocumentDB answers 25,000
    await Promise.all(Array.from({ length: 120 }, (_, i) => c.insertOne({ i })))
    // the driver splits a bulkWrite once one more write would make maxWriteBatchSize (bulk/unordered.js)
    expect(Math.max(...fake.calls.map(call => call.models.length))).toBe(24)
    expect(fake.docs('c')).toHaveLength(120)
  })
})

describe('one batch is one command at the largest limits too', () => {
  it('maxBatchSize 99,999 and maxBatchBytes 15 MiB: every batch fits the 16 MiB at which the driver splits, wrappers and index keys counted', HEAVY, async () => {
    const { fake, c } = harness({ maxBatchSize: 99_999, maxBatchBytes: 15 * 1024 * 1024 })
    fake.fallback = resolveWith({ upsertedIds: {} }) // acknowledged, not applied: the store's scans are not what is measured
    const s = 'x'.repeat(100)
    await Promise.all(Array.from({ length: 100_000 }, () => c.updateOne({ _id: new ObjectId() }, { $set: { s } }, { upsert: true })))
    // the driver's own count (bulk/unordered.js): each statement as it builds it, plus its index key
    const keyBytes = String(100_000 - 1).length + 2
    for (const call of fake.calls) {
      const bytes = call.bodies.reduce((n, b) => n + BSON.calculateObjectSize({ q: b.filter, u: b.update, upsert: b.upsert, multi: false }) + keyBytes, 0)
      expect(bytes).toBeLessThan(16 * 1024 * 1024)
    }
    expect(fake.calls.reduce((n, call) => n + call.models.length, 0)).toBe(100_000)
  })
})

describe('targets as the server compares them', () => {
  it('Decimal128 1 and the number 1 are one document on the server (so are 1.5 and Decimal128 1.50): their writes keep their order', async () => {
    const { fake, c } = harness({ coalesce: false })
    await Promise.all([
      c.updateOne({ _id: 1 }, { $set: { v: 1 } }),
      c.updateOne({ _id: Decimal128.fromString('1.0') }, { $set: { v: 2 } }),
      c.updateOne({ _id: Long.fromNumber(1) }, { $set: { v: 3 } }),
      c.updateOne({ _id: 1.5 }, { $set: { v: 4 } }),
      c.updateOne({ _id: Decimal128.fromString('1.50') }, { $set: { v: 5 } }),
    ])
    // one after the other, never two of one document in one unordered bulkWrite
    expect(fake.calls.map(call => call.models.length)).toEqual([2, 2, 1])
  })

  it('a Decimal128 shares the key of every number it equals, and of no integer it does not', () => {
    const d = (s: string): string => targetOfId(Decimal128.fromString(s))
    expect(d('1.0')).toBe(targetOfId(1))
    expect(d('10E-1')).toBe(targetOfId(1))
    expect(d('-0')).toBe(targetOfId(0))
    expect(d('-0E-10')).toBe(targetOfId(0))
    expect(d('0.5')).toBe(targetOfId(0.5))
    expect(d('9007199254740993')).toBe(targetOfId(Long.fromString('9007199254740993'))) // past 2^53: exact, as a Long
    expect(d('1152921504606846976')).toBe(targetOfId(2 ** 60))
    expect(d('1E+3')).toBe(targetOfId(1000))
    expect(d('NaN')).toBe(targetOfId(NaN))
    expect(d('9007199254740993')).not.toBe(targetOfId(9007199254740992))
    expect(d('2')).not.toBe(targetOfId(1))
  })
})

describe('targets as the driver sends them', () => {
  it("'\\uD800' and '\\uFFFD' are one document on the server (a lone surrogate is sent as U+FFFD): their writes keep their order", async () => {
    const { fake, c } = harness({ coalesce: false })
    await Promise.all([
      c.updateOne({ _id: '\uD800' }, { $set: { v: 1 } }),
      c.updateOne({ _id: '\uFFFD' }, { $set: { v: 2 } }),
    ])
    // not one unordered bulkWrite (no order between them): the second waits for the first
    expect(fake.calls.map(call => call.models.length)).toEqual([1, 1])
  })
})
