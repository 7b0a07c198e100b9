import { describe, expect, it, vi } from 'vitest'
import { ObjectId } from 'mongodb'
import { ErrorCodes, WriteRejectedError } from '../../src/index.js'
import { networkError, rejectWith, serverSelectionError, settle } from './fake-db.js'
import { fastForward, harness, useFakeClock } from './harness.js'
import { Batch } from '../../src/buffer/batch.js'
import { Retries } from '../../src/buffer/retries.js'
import { buildInsert } from '../../src/write/build-op.js'

function reasonOf (s: Awaited<ReturnType<typeof settle>> | undefined): Error & Record<string, unknown> {
  if (s?.status !== 'rejected') throw new Error(`expected a rejection, got ${JSON.stringify(s)}`)
  return s.reason
}

describe('retries after a transient failure of the whole bulkWrite', () => {
  it('sends the same models again after the backoff; stats().retries counts it', async () => {
    const { fake, wb, c } = harness({ retry: { baseDelayMs: 1 } })
    fake.next(rejectWith(serverSelectionError))
    const writes = [c.insertOne({ _id: 1, a: 1 }), c.insertOne({ _id: 2, a: 2 }), c.insertOne({ _id: 3, a: 3 })]
    await expect(Promise.all(writes)).resolves.toEqual([{ insertedId: 1 }, { insertedId: 2 }, { insertedId: 3 }])
    expect(fake.calls).toHaveLength(2)
    expect(fake.calls[1]?.models).toEqual(fake.calls[0]?.models)
    expect(fake.calls[1]?.startedAt).toBeGreaterThan(fake.calls[0]?.answeredAt ?? Infinity)
    expect(fake.docs('c')).toHaveLength(3)
    expect(wb.stats()).toMatchObject({ retries: 1, batches: 2, flushedOps: 3, failedOps: 0, pending: 0 })
  })

  it('a batch holding a merged update is sent again whole: the writes merged into it go with it', async () => {
    // coalescing is on by default: the retry threw "a write in flight cannot become in flight"
    // and failed every write of the batch, and any later write merged into it
    const { fake, wb, c } = harness({ retry: { baseDelayMs: 1 }, lingerMs: 5 })
    fake.next(rejectWith(serverSelectionError))
    const writes = [c.updateOne({ _id: 1 }, { $set: { a: 1 } }, { upsert: true }), c.updateOne({ _id: 1 }, { $set: { b: 2 } }, { upsert: true })]
    await expect(Promise.all(writes)).resolves.toHaveLength(2)
    expect(fake.calls).toHaveLength(2)
    expect(fake.calls[0]?.models).toHaveLength(1) // merged
    expect(fake.docs('c')).toEqual([{ _id: 1, a: 1, b: 2 }])
    expect(wb.stats()).toMatchObject({ retries: 1, failedOps: 0, pending: 0 })
  })

  it('retry: { maxAttempts: 1 } never retries', async () => {
    const { fake, wb, c } = harness({ retry: { maxAttempts: 1, baseDelayMs: 1 } })
    fake.next(rejectWith(serverSelectionError))
    const s = await settle(c.insertOne({ a: 1 }))
    expect(reasonOf(s)).toMatchObject({ code: ErrorCodes.BATCH_FAILED, outcome: 'not-sent', attempts: 1 })
    expect(fake.calls).toHaveLength(1)
    expect(wb.stats()).toMatchObject({ retries: 0, failedOps: 1, pending: 0 })
  })

  it('gives up after maxAttempts sends', async () => {
    const { fake, wb, c } = harness({ retry: { maxAttempts: 3, baseDelayMs: 1 } })
    fake.fallback = rejectWith(serverSelectionError)
    const s = await settle(c.insertOne({ a: 1 }))
    expect(reasonOf(s)).toMatchObject({ code: ErrorCodes.BATCH_FAILED, outcome: 'not-sent', attempts: 3 })
    expect(fake.calls).toHaveLength(3)
    expect(wb.stats()).toMatchObject({ retries: 2, failedOps: 1, pending: 0 })
  })

  it('while a batch waits to be retried, a later write to the same _id is not sent before it', async () => {
    // a backoff long enough (50–100 ms) for the later writes to be submitted while it runs
    const { fake, wb, c } = harness({ coalesce: false, retry: { baseDelayMs: 100 } })
    fake.seed('c', { _id: 1 }, { _id: 2 })
    fake.next(rejectWith(serverSelectionError)) // never sent (a standalone): retried at once after the backoff
    const first = c.updateOne({ _id: 1 }, { $set: { v: 'first' } })
    await vi.waitFor(() => { expect(wb.stats().retries).toBe(1) }, { interval: 1 })
    expect(fake.calls).toHaveLength(1) // the retry has not gone yet
    const later = c.updateOne({ _id: 1 }, { $set: { v: 'later' } })
    const other = c.updateOne({ _id: 2 }, { $set: { v: 'other' } }) // another target: not held back
    await Promise.all([first, later, other, wb.flush()])

    const sends = (id: number): number[] => fake.calls.flatMap((call, i) => call.ids.includes(id) ? [i] : [])
    const [failed, retried, next] = sends(1)
    expect(sends(1)).toHaveLength(3)
    expect(fake.calls[retried ?? -1]?.bodies[0]).toEqual({ filter: { _id: 1 }, update: { $set: { v: 'first' } } })
    expect(fake.calls[next ?? -1]?.bodies[0]).toEqual({ filter: { _id: 1 }, update: { $set: { v: 'later' } } })
    expect(failed).toBe(0)
    expect(retried).toBeLessThan(next ?? -1)
    expect(fake.calls[next ?? -1]?.startedAt).toBeGreaterThan(fake.calls[retried ?? -1]?.answeredAt ?? Infinity)
    expect(fake.doc('c', 1)).toEqual({ _id: 1, v: 'later' })
    expect(fake.doc('c', 2)).toEqual({ _id: 2, v: 'other' })
  })

  it('a retried insert whose generated _id comes back 11000 after an unknown first attempt is confirmed by a find() and resolves', async () => {
    useFakeClock() // an unknown outcome may hold its documents a while before the retry (a fence)
    const { fake, wb, c } = harness({ retry: { baseDelayMs: 1 } })
    // the first attempt is applied, but its answer is lost
    fake.next(rejectWith(networkError, true))
    const s = await fastForward(c.insertOne({ a: 1 }))
    expect(s.status).toBe('fulfilled')
    const result = s.status === 'fulfilled' ? s.value : { insertedId: undefined }
    expect(result.insertedId).toBeInstanceOf(ObjectId)
    expect(fake.calls).toHaveLength(2) // the retry met its own first copy: duplicate key
    expect(fake.finds).toEqual([{
      collection: 'c',
      filter: { _id: { $in: [result.insertedId] } },
      options: { projection: { _id: 1 }, readPreference: 'primary' },
    }])
    expect(fake.docs('c')).toEqual([{ _id: result.insertedId, a: 1 }])
    expect(wb.stats()).toMatchObject({ flushedOps: 1, failedOps: 0, retries: 1 })
  })

  it('a retried insert with the caller\'s own _id that comes back 11000 ends unknown (it may be someone else\'s document)', async () => {
    useFakeClock()
    const { fake, c } = harness({ retry: { baseDelayMs: 1 } })
    fake.next(rejectWith(networkError, true))
    const s = await fastForward(c.insertOne({ _id: 'mine', a: 1 }))
    const err = reasonOf(s)
    expect(err).toBeInstanceOf(WriteRejectedError)
    expect(err).toMatchObject({ code: 11000, outcome: 'unknown', attempts: 2 })
    expect(fake.finds).toHaveLength(0)
  })

  it('when the confirming find() fails, the retried insert ends unknown', async () => {
    useFakeClock()
    const { fake, c } = harness({ retry: { baseDelayMs: 1 } })
    fake.next(rejectWith(networkError, true))
    fake.findError = networkError()
    const s = await fastForward(c.insertOne({ a: 1 }))
    expect(reasonOf(s)).toMatchObject({ code: 11000, outcome: 'unknown', attempts: 2 })
    expect(fake.finds).toHaveLength(1)
  })

  it('a write whose deadline falls within the backoff is not retried', async () => {
    const { fake, c } = harness({ retry: { baseDelayMs: 1_000 } })
    fake.next(rejectWith(serverSelectionError))
    const s = await settle(c.insertOne({ a: 1 }, { timeoutMs: 500 }))
    expect(reasonOf(s)).toMatchObject({ code: ErrorCodes.BATCH_FAILED, outcome: 'not-sent', attempts: 1 })
    expect(fake.calls).toHaveLength(1)
  })
})

describe('Retries keeps no timer of a wait it gave up (review, issue 42 item 6)', () => {
  it('a batch waiting for its fence\'s proof (a server that never answers) with a write deadline: removeAll() (close) clears the deadline watch too', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] })
    try {
      const queue = { name: 'c', startBackoff: () => {}, endBackoff: () => {}, abandonBackoff: () => {} }
      const op = buildInsert({ a: 1 }, undefined)
      op.enqueue()
      op.send()
      op.timeOutAt(performance.now() + 60_000)
      const retries = new Retries({ baseDelayMs: 1, maxDelayMs: 10 }, () => {})
      const never = new Promise<number>(() => {})
      retries.schedule(new Batch(queue as never, [op], false), { until: performance.now() + 10, proof: never, windowMs: 10 })
      expect(vi.getTimerCount()).toBe(1) // the deadline watch (the wait itself is timed only once the proof comes)
      retries.removeAll()
      retries.stop()
      expect(vi.getTimerCount()).toBe(0) // before: the watch stayed, ref'd, until the write's deadline (60 s after close)
    } finally {
      vi.useRealTimers()
    }
  })
})
