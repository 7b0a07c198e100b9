import { describe, expect, it } from 'vitest'
import { apply, commandError, rejectWith, settle } from './fake-db.js'
import { fastForward, harness, useFakeClock } from './harness.js'

/** An overload answer as the driver throws it: the server's code and labels. */
function overload (code: number, labels: string[]): Error {
  return Object.assign(commandError(code, `fake overload ${code}`), { hasErrorLabel: (l: string) => labels.includes(l) })
}
const REFUSED = ['SystemOverloadedError', 'RetryableError', 'NoWritesPerformed']

describe('overload answers: honoured, counted, the in-flight limit halved', () => {
  it('462 with NoWritesPerformed: nothing applied, every write (an $inc too) retried after a backoff; counted; the limit halves', async () => {
    const { fake, wb, c } = harness({ retry: { baseDelayMs: 1 } })
    expect(wb.stats().inFlightLimit).toBe(4)
    fake.next(rejectWith(overload(462, REFUSED)))
    await Promise.all([c.insertOne({ _id: 1 }), c.updateOne({ _id: 1 }, { $inc: { n: 1 } })])
    expect(fake.doc('c', 1)).toEqual({ _id: 1, n: 1 }) // applied once
    // the insert's batch refused and sent again; the update of its document (its own command) waited behind it, and went once
    expect(fake.calls.map(call => call.kinds[0])).toEqual(['insertOne', 'insertOne', 'updateOne'])
    expect(wb.stats()).toMatchObject({ overloadedBatches: 1, retries: 1, inFlightLimit: 2 })
  })

  it('473 (interrupted, no RetryableError): only retry-safe writes go again; an $inc is told unknown; counted', async () => {
    const { fake, wb, c } = harness({ retry: { baseDelayMs: 1 }, coalesce: false }, 'standalone')
    fake.server = 'ferretdb' // from a server whose refusals prove nothing, too
    await c.insertOne({ _id: 1, n: 0 })
    fake.next(rejectWith(overload(473, ['SystemOverloadedError'])))
    const [set, inc] = await Promise.all([
      settle(c.updateOne({ _id: 2 }, { $set: { v: 1 } }, { upsert: true })),
      settle(c.updateOne({ _id: 1 }, { $inc: { n: 1 } })),
    ])
    expect(set.status).toBe('fulfilled')
    expect(inc).toMatchObject({ status: 'rejected', reason: { outcome: 'unknown' } })
    expect(wb.stats()).toMatchObject({ overloadedBatches: 1, inFlightLimit: 2 })
  })

  it('a refusal that is no overload leaves the limit and the counter alone', async () => {
    const { fake, wb, c } = harness({ retry: { baseDelayMs: 1 } })
    fake.next(rejectWith(commandError(10107, 'not primary')))
    await c.insertOne({ _id: 1 })
    expect(wb.stats()).toMatchObject({ overloadedBatches: 0, retries: 1, inFlightLimit: 4 })
  })

  it('an overload that lasts: each write is sent retry.maxAttempts times at most, then told not-sent; the limit goes down to 1', async () => {
    useFakeClock()
    const { fake, wb, c } = harness({ retry: { maxAttempts: 3, baseDelayMs: 10 } })
    fake.fallback = rejectWith(() => overload(462, REFUSED))
    const writes: Array<Promise<unknown>> = [c.insertOne({ _id: 1 }), c.updateOne({ _id: 2 }, { $inc: { n: 1 } })]
    const results = await Promise.all(writes.map(async w => await fastForward(w)))
    for (const r of results) expect(r).toMatchObject({ status: 'rejected', reason: { code: 'WRITE_BUFFER_BATCH_FAILED', outcome: 'not-sent', attempts: 3 } })
    // each write's batch (an insert, an update: two commands) sent three times: the buffer's
    // attempts (the driver's own overload retries come on top of each: docs/outcomes.md)
    for (const id of [1, 2]) expect(fake.calls.filter(call => call.ids.includes(id))).toHaveLength(3)
    expect(fake.calls).toHaveLength(6)
    expect(wb.stats()).toMatchObject({ overloadedBatches: 6, inFlightLimit: 1 })
    fake.fallback = apply
  })

  it("inFlightLimit: 'fixed' counts overloads and keeps the limit at maxInFlight", async () => {
    const { fake, wb, c } = harness({ retry: { baseDelayMs: 1 }, inFlightLimit: 'fixed', maxInFlight: 6 })
    fake.next(rejectWith(overload(462, REFUSED)))
    await c.insertOne({ _id: 1 })
    expect(wb.stats()).toMatchObject({ overloadedBatches: 1, inFlightLimit: 6 })
  })
})
