import { describe, expect, it, onTestFinished, vi } from 'vitest'
import { Admission } from '../../src/buffer/admission.js'
import { Batch } from '../../src/buffer/batch.js'
import { FlushTracker } from '../../src/buffer/flush-tracker.js'
import { ReadCache } from '../../src/cache/read-cache.js'
import type { Document } from 'mongodb'
import { ErrorCodes, WriteBufferError, WriteRejectedError } from '../../src/index.js'
import { bulkWriteError, hold, pause, rejectWith, resolveWith, serverSelectionError, settle, track, type Responder, type Settled } from './fake-db.js'
import { harness, type Harness } from './harness.js'

/** Submits `n` upserts to distinct _ids in one go (one batch) and settles them all. */
async function upserts (h: Harness, n: number): Promise<Array<Settled<Document>>> {
  const writes = []
  for (let i = 0; i < n; i++) writes.push(h.c.updateOne({ _id: i }, { $set: { v: i } }, { upsert: true }))
  const settled = Promise.all(writes.map(w => settle(w)))
  await h.wb.flush()
  return settled
}

/** Every write settled once, the counters add up, nothing is left pending, and the buffer still works. */
async function expectAllSettledOnce (h: Harness, n: number, settled: Array<Settled<Document>>): Promise<void> {
  expect(settled).toHaveLength(n)
  const ok = settled.filter(s => s.status === 'fulfilled').length
  const stats = h.wb.stats()
  expect(stats).toMatchObject({ flushedOps: ok, failedOps: n - ok, pending: 0, waiting: 0, inFlight: 0 })
  // not stalled: a later write goes through a fresh batch
  h.fake.fallback = resolveWith({ upsertedIds: {} })
  const after = h.c.insertOne({ after: true })
  await h.wb.flush()
  await expect(after).resolves.toHaveProperty('insertedId')
  expect(h.wb.stats()).toMatchObject({ flushedOps: ok + 1, pending: 0, inFlight: 0 })
}

describe('every write settles exactly once', () => {
  it('when the bulkWrite succeeds', async () => {
    const h = harness()
    const settled = await upserts(h, 5)
    expect(settled.map(s => s.status === 'fulfilled' ? s.value : s.reason)).toEqual([0, 1, 2, 3, 4].map(i => ({ upsertedId: i })))
    await expectAllSettledOnce(h, 5, settled)
  })

  it('when some writes are refused (writeErrors)', async () => {
    const h = harness()
    h.fake.next(rejectWith(bulkWriteError([{ index: 1, code: 11000 }, { index: 3, code: 121 }])))
    const settled = await upserts(h, 5)
    expect(settled.map(s => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'rejected', 'fulfilled'])
    expect(h.fake.calls).toHaveLength(1)
    await expectAllSettledOnce(h, 5, settled)
  })

  it('when the whole bulkWrite fails for good', async () => {
    const h = harness()
    const unauthorized = Object.assign(new Error('not authorized'), { code: 13 })
    Object.defineProperty(unauthorized, 'name', { value: 'MongoServerError' })
    h.fake.next(rejectWith(unauthorized))
    const settled = await upserts(h, 5)
    for (const s of settled) {
      expect(s.status).toBe('rejected')
      if (s.status === 'rejected') {
        expect(s.reason).toBeInstanceOf(WriteBufferError)
        expect(s.reason).toMatchObject({ code: ErrorCodes.BATCH_FAILED, outcome: 'rejected', attempts: 1 })
        expect((s.reason as { cause?: unknown }).cause).toBe(unauthorized)
      }
    }
    await expectAllSettledOnce(h, 5, settled)
  })

  const weird: Array<[string, Responder]> = [
    ['a result whose upsertedIds getter throws', resolveWith({ get upsertedIds (): never { throw new Error('boom') } })],
    ['writeErrors holding a non-object', rejectWith(Object.assign(new Error('weird'), { writeErrors: [null] }))],
    ['a rejection with null', () => { throw null }], // eslint-disable-line no-throw-literal
    ['a rejection with a string', () => { throw 'oops' }], // eslint-disable-line no-throw-literal
  ]
  it.each(weird)('when the driver answers with %s (each write is rejected, outcome unknown)', async (_name, responder) => {
    const h = harness()
    h.fake.next(responder)
    const settled = await upserts(h, 4)
    for (const s of settled) {
      expect(s.status).toBe('rejected')
      if (s.status === 'rejected') {
        expect(s.reason).toBeInstanceOf(WriteBufferError)
        expect(s.reason).toMatchObject({ code: ErrorCodes.BATCH_FAILED, outcome: 'unknown' })
      }
    }
    expect(h.fake.calls).toHaveLength(1) // an unknown outcome of a non-idempotent... or a bug: never re-sent
    await expectAllSettledOnce(h, 4, settled)
  })

  it('when result handling breaks half-way: the writes settled before the bug keep their result', async () => {
    const h = harness()
    // reading the upserted id of the write at index 2 throws
    const upsertedIds = new Proxy({}, { get: (_t, key) => { if (key === '2') throw new Error('boom'); return undefined } })
    h.fake.next(resolveWith({ upsertedIds }))
    const settled = await upserts(h, 4)
    expect(settled.map(s => s.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'rejected'])
    const last = settled[3]
    expect(last?.status === 'rejected' && last.reason.message).toMatch(/internal error.*boom/)
    await expectAllSettledOnce(h, 4, settled)
  })

  it('when settling breaks at a write others were coalesced into: they are rejected too, none is left in flight', async () => {
    const h = harness({ cache: { ttlMs: 60_000 } })
    h.fake.fallback = hold
    const first = settle(h.c.updateOne({ _id: 1 }, { $set: { a: 1 } }, { upsert: true }))
    const call = await h.fake.waitForCalls(1)
    // parked behind the first while it is out, then coalesced into one write of the next batch
    const later = [2, 3, 4].map(v => settle(h.c.updateOne({ _id: 1 }, { $set: { a: v } })))
    call.answer()
    expect(await first).toMatchObject({ status: 'fulfilled' })
    const next = await h.fake.waitForCalls(2)
    expect(next.models).toHaveLength(1)
    // a bug in the read cache while the leader is settled: the leader is told, its joiners are not yet
    const broken = vi.spyOn(ReadCache.prototype, 'settleWrite').mockImplementationOnce(() => { throw new Error('boom') })
    onTestFinished(() => { broken.mockRestore() })
    next.answer()
    const settled = await Promise.all(later)
    expect(settled[0]).toMatchObject({ status: 'fulfilled' })
    for (const s of settled.slice(1)) expect(s.status === 'rejected' && s.reason.message).toMatch(/internal error.*boom/)
    expect(h.wb.stats()).toMatchObject({ inFlight: 0 })
    await h.wb.flush()
  })

  it('when preparing a batch breaks before it is sent: its writes fail not-sent, the slot is freed, nothing is stranded', async () => {
    const h = harness()
    const send = Batch.prototype.send
    const spy = vi.spyOn(Batch.prototype, 'send').mockImplementationOnce(function (this: Batch) {
      send.call(this) // marks the writes sent, then a bug
      throw new Error('boom')
    })
    const settled = await upserts(h, 4)
    spy.mockRestore()
    for (const s of settled) {
      expect(s.status === 'rejected' && s.reason).toMatchObject({ code: ErrorCodes.BATCH_FAILED, outcome: 'not-sent' })
      expect(s.status === 'rejected' && s.reason.message).toMatch(/internal error.*boom/)
    }
    expect(h.fake.calls).toHaveLength(0) // never on the wire
    await expectAllSettledOnce(h, 4, settled)
  })

  it('stats() counts acknowledged and failed writes and pending goes back to 0', async () => {
    const { fake, wb, c } = harness()
    fake.seed('c', { _id: 'dup' })
    fake.next(hold)
    const writes = [c.insertOne({ _id: 'a' }), c.insertOne({ _id: 'dup' }), c.insertOne({ _id: 'b' })]
    const settled = Promise.all(writes.map(w => settle(w)))
    const call = await fake.waitForCalls(1)
    expect(wb.stats()).toMatchObject({ pending: 3, inFlight: 1, batches: 1, flushedOps: 0, failedOps: 0 })
    call.answer() // applies: 'dup' is a duplicate key
    const [a, dup, b] = await settled
    expect(a).toEqual({ status: 'fulfilled', value: { insertedId: 'a' } })
    expect(b).toEqual({ status: 'fulfilled', value: { insertedId: 'b' } })
    expect(dup?.status === 'rejected' && dup.reason).toBeInstanceOf(WriteRejectedError)
    expect(dup?.status === 'rejected' && dup.reason).toMatchObject({ code: 11000, outcome: 'rejected', attempts: 1 })
    expect(wb.stats()).toMatchObject({ pending: 0, inFlight: 0, batches: 1, flushedOps: 2, failedOps: 1 })
  })
})

describe('flush()', () => {
  it('resolves at once when nothing is pending', async () => {
    const { fake, wb } = harness()
    await wb.flush()
    expect(fake.calls).toHaveLength(0)
  })

  it('waits for every write submitted before it, and not for writes submitted after it', async () => {
    const { fake, wb, c } = harness()
    fake.fallback = hold
    const before = [c.insertOne({ i: 1 }), c.updateOne({ _id: 1 }, { $set: { x: 1 } }, { upsert: true })]
    const order: string[] = []
    for (const [i, w] of before.entries()) w.then(() => { order.push(`before ${i}`) })
    const flushed = wb.flush().then(() => { order.push('flush') })
    const flushDone = track(flushed)
    // both commands of the writes before are out
    await fake.waitForCalls(2)
    // another collection, so it goes now (a collection with a batch out may hold new writes back)
    const after = track(wb.collection('d').insertOne({ i: 2 }))
    const afterCall = await fake.waitForCalls(3)

    await pause(10)
    expect(flushDone.done).toBe(false) // nothing answered yet
    fake.calls[0]?.answer()
    await pause(10)
    expect(flushDone.done).toBe(false) // one of the two earlier bulkWrites is still out
    fake.calls[1]?.answer()
    await flushed
    expect(order).toEqual(['before 0', 'before 1', 'flush'])
    expect(after.done).toBe(false) // flush() did not wait for it
    expect(afterCall.pending).toBe(true)
    afterCall.answer()
    expect(await after.promise).toMatchObject({ status: 'fulfilled' })
  })

  it('each of two flush() calls waits for its own writes only', async () => {
    const { fake, wb, c } = harness()
    fake.fallback = hold
    const a = c.insertOne({ i: 1 })
    const flush1 = track(wb.flush())
    const first = await fake.waitForCalls(1)
    const b = wb.collection('d').insertOne({ i: 2 })
    const flush2 = track(wb.flush())
    const second = await fake.waitForCalls(2)
    first.answer()
    await a
    await flush1.promise
    await pause(10)
    expect(flush2.done).toBe(false) // b is still out
    second.answer()
    await b
    expect(await flush2.promise).toEqual({ status: 'fulfilled', value: undefined })
  })

  it('an acknowledged batch gives back its room once, and its flush epochs once per run of writes', async () => {
    const room = vi.spyOn(Admission.prototype, 'left')
    const epochs = vi.spyOn(FlushTracker.prototype, 'settle')
    onTestFinished(() => { room.mockRestore(); epochs.mockRestore() })
    const { fake, wb, c } = harness()
    fake.fallback = hold
    const order: string[] = []
    const told = (w: Promise<unknown>, name: string): Promise<unknown> => w.then(() => { order.push(name) })
    // one batch: three writes before the first flush(), two between it and the second
    const first = [0, 1, 2].map(i => told(c.insertOne({ i }), `write ${i}`))
    const flush1 = told(wb.flush(), 'flush 1')
    const second = [3, 4].map(i => told(c.insertOne({ i }), `write ${i}`))
    const flush2 = told(wb.flush(), 'flush 2')
    const call = await fake.waitForCalls(1)
    expect(call.models).toHaveLength(5)
    epochs.mockClear()
    room.mockClear()
    call.answer()
    await Promise.all([...first, flush1, ...second, flush2])
    // each flush() resolves after the callers of the writes it waits for
    expect(order.indexOf('flush 1')).toBeGreaterThan(order.indexOf('write 2'))
    expect(order.at(-1)).toBe('flush 2')
    expect(epochs.mock.calls.map(([, writes]) => writes)).toEqual([3, 2])
    expect(room.mock.calls.map(([writes]) => writes)).toEqual([5])
    expect(wb.stats()).toMatchObject({ pending: 0, acknowledgedOps: 5 })
  })

  it('also waits for a write that failed and is waiting to be retried', async () => {
    const { fake, wb, c } = harness({ retry: { baseDelayMs: 5 } })
    fake.next(rejectWith(serverSelectionError))
    let settled = false
    const w = c.insertOne({ i: 1 })
    w.then(() => { settled = true }, () => { settled = true })
    await wb.flush()
    expect(settled).toBe(true)
    expect(fake.calls).toHaveLength(2)
    expect(wb.stats().retries).toBe(1)
    await expect(w).resolves.toHaveProperty('insertedId')
  })
})
