import diagnostics from 'node:diagnostics_channel'
import { describe, expect, it } from 'vitest'
import type { ObjectId } from 'mongodb'
import { BATCH_CHANNEL, WriteBuffer } from '../src/index.js'
import { proxiedSuite } from './support/proxied.js'
import { Ledger } from './support/ledger.js'

// A server shedding load (MongoDB 8.x admission control: IngressRequestRateLimitExceeded 462,
// SystemOverloadedError + RetryableError + NoWritesPerformed), made by the fault proxy in front
// of the suite's server. Every caller must be told the truth (the ledger: nothing lost, nothing
// applied twice, nothing told "not written" that was), the in-flight limit must come down, and
// the commands sent per write must stay within the driver's attempts × retry.maxAttempts.

const OVERLOAD = ['SystemOverloadedError', 'RetryableError', 'NoWritesPerformed']

const suite = proxiedSuite('overload')
const through = suite.through

describe('overload answers (462 with NoWritesPerformed), through the fault proxy', () => {
  it('under load on 8 collections: every caller told the truth, nothing lost or applied twice, overloads counted, the limit halved', async () => {
    const client = await through()
    const wb = new WriteBuffer(client.db(suite.direct.db.databaseName), { maxBatchSize: 20, retry: { maxAttempts: 6, baseDelayMs: 20 } })
    const COLLS = 8
    const PER = 120
    const names = Array.from({ length: COLLS }, (_, i) => `ov_${i}`)
    for (const name of names) {
      await suite.direct.db.collection<{ _id: string, n: number }>(name).insertMany(Array.from({ length: PER / 4 }, (_, k) => ({ _id: `inc${k}`, n: 0 })))
    }
    // the least limit seen at any batch's end (told once per bulkWrite, after its callers settled)
    let least = wb.stats().inFlightLimit
    const onBatch = (): void => { least = Math.min(least, wb.stats().inFlightLimit) }
    diagnostics.subscribe(BATCH_CHANNEL, onBatch)
    const rule = suite.proxy.fail({ commands: ['insert', 'update'], errorCode: 462, errorLabels: OVERLOAD, times: 12 })
    const ledger = new Ledger()
    const incs = new Ledger()
    try {
      const all: Array<Promise<void>> = []
      for (let k = 0; k < PER; k++) {
        for (const [i, name] of names.entries()) {
          const c = wb.collection<{ m?: number, n?: number, _id?: string | ObjectId }>(name)
          const marker = i * PER + k
          all.push(ledger.track(marker, c.insertOne({ m: marker })))
          // an $inc is not retry-safe: it goes again only because the server said nothing was applied
          if (k < PER / 4) all.push(incs.track(marker, c.updateOne({ _id: `inc${k}` }, { $inc: { n: 1 } })))
        }
        if (k % 10 === 0) await new Promise(resolve => setImmediate(resolve)) // arrivals over several turns
      }
      await Promise.all(all)
    } finally {
      rule.off()
      diagnostics.unsubscribe(BATCH_CHANNEL, onBatch)
    }
    expect(rule.fired, 'the overload fired').toBeGreaterThan(0)
    expect(ledger.unsettled + incs.unsettled).toBe(0)

    const copies = new Map<number, number>()
    const incCopies = new Map<number, number>()
    for (const [i, name] of names.entries()) {
      for (const d of await suite.direct.db.collection<{ _id: unknown, m?: number, n?: number }>(name).find().toArray()) {
        if (typeof d.m === 'number') copies.set(d.m, (copies.get(d.m) ?? 0) + 1)
        else if (typeof d.n === 'number') incCopies.set(i * PER + Number(String(d._id).slice(3)), d.n)
      }
    }
    const audit = ledger.audit(copies)
    const incAudit = incs.audit(incCopies)
    expect({ ...audit, failures: ledger.failures() }).toMatchObject({ attempted: COLLS * PER, lost: 0, duplicated: 0, phantom: 0, failures: {} })
    expect({ ...incAudit, failures: incs.failures() }).toMatchObject({ attempted: COLLS * PER / 4, lost: 0, duplicated: 0, phantom: 0, failures: {} })
    // nothing was applied by a refused command: every write was retried until acknowledged
    expect(audit.acknowledged).toBe(COLLS * PER)
    expect(incAudit.acknowledged).toBe(COLLS * PER / 4)
    const stats = wb.stats()
    expect(stats.overloadedBatches).toBeGreaterThan(0)
    expect(stats.retries).toBeGreaterThanOrEqual(stats.overloadedBatches)
    expect(least, 'the in-flight limit came down from where it started (4)').toBeLessThan(4)
    await wb.close()
  }, 120_000)

  for (const maxAdaptiveRetries of [2, 0]) {
    it(`an overload that lasts: at most (maxAdaptiveRetries ${maxAdaptiveRetries} + 1) × retry.maxAttempts commands per write, then not-sent`, async () => {
      const client = await through({ maxAdaptiveRetries })
      const maxAttempts = 3
      const wb = new WriteBuffer(client.db(suite.direct.db.databaseName), { retry: { maxAttempts, baseDelayMs: 10 } })
      const coll = `ov_bound_${maxAdaptiveRetries}`
      await suite.direct.db.collection<{ _id: string, n: number }>(coll).insertOne({ _id: 'a', n: 0 })
      const rule = suite.proxy.fail({ commands: ['insert', 'update'], collection: coll, errorCode: 462, errorLabels: OVERLOAD, times: 1_000 })
      const c = wb.collection<{ _id?: string | ObjectId, k?: number, n?: number }>(coll)
      const results = await Promise.allSettled([c.insertOne({ k: 1 }), c.updateOne({ _id: 'a' }, { $inc: { n: 1 } })])
      rule.off()
      for (const r of results) {
        expect(r).toMatchObject({ status: 'rejected', reason: { code: 'WRITE_BUFFER_BATCH_FAILED', outcome: 'not-sent', attempts: maxAttempts } })
      }
      const sent = suite.proxy.seen().filter(cmd => cmd.collection === coll)
      const bound = (maxAdaptiveRetries + 1) * maxAttempts
      for (const kind of ['insert', 'update']) {
        // each write went in one command per attempt, which the driver sent up to maxAdaptiveRetries + 1 times
        expect(sent.filter(cmd => cmd.name === kind).length, `${kind} commands`).toBe(bound)
      }
      expect(await suite.direct.db.collection(coll).countDocuments({ k: 1 })).toBe(0)
      expect(await suite.direct.db.collection<{ _id: string, n: number }>(coll).findOne({ _id: 'a' })).toEqual({ _id: 'a', n: 0 })
      expect(wb.stats()).toMatchObject({ overloadedBatches: 2 * maxAttempts, inFlightLimit: 1 })
      await wb.close()
    }, 120_000)
  }
})
