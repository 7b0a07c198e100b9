import { describe, expect, it } from 'vitest'
import { ErrorCodes, WriteBufferError } from '../../src/index.js'
import { hold, networkError, pause, rejectWith, settle, track } from './fake-db.js'
import { fastForward, harness, useFakeClock } from './harness.js'

// Real timers, short deadlines: the buffer sweeps deadlines with its own (unref'd) timer, so
// these tests only wait for rejections, never assert how soon they come. Two tests need an order
// between a deadline and something else (a send, another deadline): theirs are on the fake
// clock, which a busy machine cannot stretch.

describe('deadlines', () => {
  it('timeoutMs rejects a write that cannot be sent while earlier bulkWrites hold every slot (not-sent)', async () => {
    // the first write is sent before its 60 ms are up however busy the machine (with eight CPU
    // burners the turn that sends it came after them): the deadlines are on the fake clock
    useFakeClock()
    const { fake, wb, c } = harness({ maxInFlight: 1 })
    fake.next(hold)
    const first = c.insertOne({ _id: 1 }, { timeoutMs: 60 })
    const call = await fake.waitForCalls(1)
    const waiting = settle(c.insertOne({ _id: 2 }, { timeoutMs: 60 }))
    await fastForward(waiting) // past both deadlines, the first write still on the wire
    const late = await waiting

    expect(late.status).toBe('rejected')
    if (late.status === 'rejected') {
      expect(late.reason).toBeInstanceOf(WriteBufferError)
      expect(late.reason).toMatchObject({ code: ErrorCodes.TIMEOUT, outcome: 'not-sent', attempts: 0, statusCode: 503 })
    }
    expect(call.pending).toBe(true) // the first is still on the wire
    call.answer()
    await expect(first).resolves.toEqual({ insertedId: 1 }) // sent in time: a deadline never cuts a write on the wire
    await wb.flush()
    expect(fake.calls.flatMap(x => x.ids)).toEqual([1]) // the timed-out write was never sent
    expect(fake.docs('c')).toEqual([{ _id: 1 }])
    expect(wb.stats()).toMatchObject({ pending: 0, flushedOps: 1, failedOps: 1 })
  })

  it('a retry that could only go after the write\'s deadline (behind a fence) is not made: it fails now, unknown', async () => {
    const { fake, c } = harness({ maxTimeMS: 2_000, retry: { baseDelayMs: 1 } })
    fake.next(rejectWith(networkError))
    const t0 = Date.now()
    // a $set is retry-safe, but its retry must wait out the fence (maxTimeMS + 1 s): past its 300 ms deadline
    const w = await settle(c.updateOne({ _id: 1 }, { $set: { a: 1 } }, { timeoutMs: 300 }))
    expect(w).toMatchObject({ status: 'rejected', reason: { code: ErrorCodes.BATCH_FAILED, outcome: 'unknown', attempts: 1 } })
    expect(Date.now() - t0).toBeLessThan(1_000) // told at once, not after the fence
    expect(fake.calls).toHaveLength(1)
  })

  it('writeTimeoutMs is the default deadline of every write', async () => {
    const { fake, wb, c } = harness({ maxInFlight: 1, writeTimeoutMs: 60 })
    fake.next(hold)
    const first = c.updateOne({ _id: 1 }, { $set: { a: 1 } }, { upsert: true })
    const call = await fake.waitForCalls(1)
    const late = await settle(c.updateOne({ _id: 2 }, { $set: { a: 1 } }, { upsert: true }))
    expect(late.status === 'rejected' && late.reason).toMatchObject({ code: ErrorCodes.TIMEOUT, outcome: 'not-sent' })
    call.answer()
    await expect(first).resolves.toEqual({ upsertedId: 1 })
    await wb.flush()
    expect(fake.calls).toHaveLength(1)
  })

  it('a per-write timeoutMs overrides writeTimeoutMs', async () => {
    const { fake, c } = harness({ maxInFlight: 1, writeTimeoutMs: 60_000 })
    fake.next(hold)
    c.insertOne({ _id: 1 })
    const call = await fake.waitForCalls(1)
    const patient = track(c.insertOne({ _id: 2 }))
    const hasty = await settle(c.insertOne({ _id: 3 }, { timeoutMs: 60 }))
    expect(hasty.status === 'rejected' && hasty.reason).toMatchObject({ code: ErrorCodes.TIMEOUT })
    expect(patient.done).toBe(false)
    call.answer()
    expect(await patient.promise).toEqual({ status: 'fulfilled', value: { insertedId: 2 } })
  })

  it('a write on the wire is not timed out: its caller gets the real answer', async () => {
    const { fake, c } = harness()
    fake.next(hold)
    const w = track(c.insertOne({ _id: 1 }, { timeoutMs: 30 }))
    const call = await fake.waitForCalls(1)
    await pause(120) // well past the deadline and the sweep
    expect(w.done).toBe(false)
    call.answer()
    expect(await w.promise).toEqual({ status: 'fulfilled', value: { insertedId: 1 } })
  })

  it('a write that times out while waiting for room (onFull: wait) is rejected not-sent', async () => {
    const { fake, wb, c } = harness({ maxPending: 1 })
    fake.next(hold)
    c.insertOne({ _id: 1 })
    const call = await fake.waitForCalls(1)
    const waiting = settle(c.insertOne({ _id: 2 }, { timeoutMs: 60 }))
    expect(wb.stats().waiting).toBe(1)
    const s = await waiting
    expect(s.status === 'rejected' && s.reason).toMatchObject({ code: ErrorCodes.TIMEOUT, outcome: 'not-sent' })
    expect(wb.stats().waiting).toBe(0)
    call.answer()
    await wb.flush()
    expect(fake.calls.flatMap(x => x.ids)).toEqual([1])
  })

  it('a waiter that expires in the sweep that frees room for it is not let in: it fails not-sent and its update goes nowhere (not into a lingering write)', async () => {
    // q's and w's deadlines in one millisecond of the fake clock, so in one sweep: in real time a
    // busy machine could put a sweep between them, letting w in when q's rejection freed room
    useFakeClock()
    const { fake, wb, c } = harness({ maxPending: 3, closeTimeoutMs: 2_000 })
    fake.next(hold)
    const p = c.updateOne({ _id: 'p' }, { $set: { v: 1 } })
    const call = await fake.waitForCalls(1)
    const q = settle(c.updateOne({ _id: 'p' }, { $set: { v: 2 } }, { timeoutMs: 60 })) // parked behind p
    const l = track(c.updateOne({ _id: 'x' }, { $set: { a: 1 } }, { upsert: true, lingerMs: 5_000 }))
    const w = settle(c.updateOne({ _id: 'x' }, { $set: { b: 1 } }, { upsert: true, timeoutMs: 60 })) // no room: it waits
    expect(wb.stats()).toMatchObject({ pending: 3, waiting: 1 })
    // one sweep finds both past their deadline; rejecting q frees the room w was waiting for
    await fastForward(Promise.all([q, w]))
    expect(await q).toMatchObject({ status: 'rejected', reason: { code: ErrorCodes.TIMEOUT, outcome: 'not-sent' } })
    expect(await w).toMatchObject({ status: 'rejected', reason: { code: ErrorCodes.TIMEOUT, outcome: 'not-sent' } })
    call.answer()
    await expect(p).resolves.toEqual({})
    await wb.flush() // sends the lingering write
    expect(await l.promise).toEqual({ status: 'fulfilled', value: { upsertedId: 'x' } })
    expect(fake.docs('c').find(d => d._id === 'x')).toEqual({ _id: 'x', a: 1 }) // not w's b: w was told not-sent
    await expect(c.insertOne({ _id: 'r' })).resolves.toEqual({ insertedId: 'r' }) // the collection still sends
    expect(wb.stats()).toMatchObject({ pending: 0, waiting: 0, inFlight: 0 })
  })
})
