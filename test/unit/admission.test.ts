import { describe, expect, it } from 'vitest'
import { ErrorCodes, WriteBufferError } from '../../src/index.js'
import { apply, hold, networkError, pause, rejectWith, settle, track } from './fake-db.js'
import { harness, HEAVY } from './harness.js'

describe('admission: maxPending', () => {
  it('onFull: reject refuses a write beyond maxPending with WRITE_BUFFER_FULL, not-sent, 503 + retry-after', async () => {
    const { fake, wb, c } = harness({ maxPending: 2, onFull: 'reject' })
    fake.fallback = hold
    const admitted = [c.insertOne({ _id: 1 }), c.insertOne({ _id: 2 })]
    const refused = await settle(c.insertOne({ _id: 3 }))
    expect(refused.status).toBe('rejected')
    if (refused.status === 'rejected') {
      expect(refused.reason).toBeInstanceOf(WriteBufferError)
      expect(refused.reason).toMatchObject({
        code: ErrorCodes.FULL, outcome: 'not-sent', attempts: 0, statusCode: 503, headers: { 'retry-after': '1' },
      })
    }
    expect(wb.stats()).toMatchObject({ pending: 2, waiting: 0 })
    const call = await fake.waitForCalls(1)
    call.answer()
    await expect(Promise.all(admitted)).resolves.toHaveLength(2)
    expect(fake.calls.flatMap(x => x.ids)).toEqual([1, 2]) // the refused one never joined a batch
    // room again
    fake.fallback = apply
    await expect(c.insertOne({ _id: 4 })).resolves.toEqual({ insertedId: 4 })
  })

  it('onFull: wait queues writes beyond maxPending in FIFO order, admitted as room frees; same-target order kept', async () => {
    const { fake, wb, c } = harness({ maxPending: 2, coalesce: false })
    fake.fallback = hold
    const order: string[] = []
    const w = (name: string, id: number, v: string): Promise<unknown> =>
      c.updateOne({ _id: id }, { $set: { v } }, { upsert: true }).then(() => { order.push(name) })
    const writes = [w('w1', 1, 'w1'), w('w2', 2, 'w2')]
    const first = await fake.waitForCalls(1)
    writes.push(w('w3', 1, 'w3'), w('w4', 3, 'w4'), w('w5', 1, 'w5'))
    expect(wb.stats()).toMatchObject({ pending: 2, waiting: 3 })
    await pause(10)
    expect(fake.calls).toHaveLength(1) // nobody waiting got in
    expect(wb.stats()).toMatchObject({ pending: 2, waiting: 3 })

    first.answer()
    // w1 and w2 settle: w3 and w4 get their room; w5 still waits
    const second = await fake.waitForCalls(2)
    expect(second.ids).toEqual([1, 3])
    expect(second.bodies.map(b => b.update as unknown)).toEqual([{ $set: { v: 'w3' } }, { $set: { v: 'w4' } }])
    expect(wb.stats()).toMatchObject({ pending: 2, waiting: 1 })
    second.answer()
    const third = await fake.waitForCalls(3)
    expect(third.ids).toEqual([1])
    expect(third.bodies[0]?.update).toEqual({ $set: { v: 'w5' } })
    third.answer()
    await Promise.all(writes)
    expect(order).toEqual(['w1', 'w2', 'w3', 'w4', 'w5'])
    expect(fake.doc('c', 1)).toEqual({ _id: 1, v: 'w5' })
    expect(wb.stats()).toMatchObject({ pending: 0, waiting: 0, flushedOps: 5 })
  })

  it('a write submitted while others wait queues behind them even if room just freed', async () => {
    const { fake, wb, c } = harness({ maxPending: 1 })
    fake.fallback = hold
    const a = c.insertOne({ _id: 'a' })
    const first = await fake.waitForCalls(1)
    const b = c.insertOne({ _id: 'b' }) // waits
    expect(wb.stats().waiting).toBe(1)
    first.answer()
    await a
    const cc = c.insertOne({ _id: 'c' }) // b got the room: c waits behind it
    expect(wb.stats()).toMatchObject({ pending: 1, waiting: 1 })
    ;(await fake.waitForCalls(2)).answer()
    ;(await fake.waitForCalls(3)).answer()
    await Promise.all([b, cc])
    expect(fake.calls.map(x => x.ids)).toEqual([['a'], ['b'], ['c']])
  })

  it('maxPendingBytes: a small write does not overtake a big one waiting for room (FIFO, same-target order kept)', HEAVY, async () => {
    const MiB = 1024 * 1024
    const { fake, wb, c } = harness({ maxPending: 100, maxPendingBytes: 17 * MiB })
    fake.fallback = hold
    const big = (id: string): Promise<unknown> => c.insertOne({ _id: id, blob: 'x'.repeat(10 * MiB) })
    const w1 = big('a')
    const first = await fake.waitForCalls(1)
    const w2 = big('b') // 20 MiB would be pending: waits
    const w3 = c.updateOne({ _id: 'b' }, { $set: { small: true } }) // room for it, but it queues behind w2
    expect(wb.stats()).toMatchObject({ pending: 1, waiting: 2 })
    fake.fallback = apply
    first.answer()
    await Promise.all([w1, w2, w3])
    expect(fake.calls.map(x => x.ids)).toEqual([['a'], ['b'], ['b']])
    expect(fake.calls.map(x => x.kinds[0])).toEqual(['insertOne', 'insertOne', 'updateOne'])
    expect(fake.doc('c', 'b')).toMatchObject({ small: true })
  })
})

describe('admission: abort signals', () => {
  it('an already-aborted signal rejects at once with WRITE_BUFFER_ABORTED; nothing is sent', async () => {
    const { fake, wb, c } = harness()
    const s = await settle(c.insertOne({ _id: 1 }, { signal: AbortSignal.abort() }))
    expect(s.status === 'rejected' && s.reason).toBeInstanceOf(WriteBufferError)
    expect(s.status === 'rejected' && s.reason).toMatchObject({ code: ErrorCodes.ABORTED, outcome: 'not-sent', attempts: 0 })
    await wb.flush()
    expect(fake.calls).toHaveLength(0)
    expect(wb.stats().pending).toBe(0)
  })

  it('aborting a queued, never-sent write rejects it and it is never sent', async () => {
    const { fake, wb, c } = harness({ maxInFlight: 1 })
    fake.fallback = hold
    const first = c.insertOne({ _id: 1 })
    const call = await fake.waitForCalls(1)
    const ac = new AbortController()
    const queued = settle(c.insertOne({ _id: 2 }, { signal: ac.signal }))
    const kept = c.insertOne({ _id: 3 })
    expect(wb.stats().pending).toBe(3)
    ac.abort()
    expect(await queued).toMatchObject({ status: 'rejected', reason: { code: ErrorCodes.ABORTED, outcome: 'not-sent' } })
    expect(wb.stats().pending).toBe(2)
    fake.fallback = apply
    call.answer()
    await Promise.all([first, kept])
    expect(fake.calls.flatMap(x => x.ids)).toEqual([1, 3])
  })

  it('aborting a write waiting for room rejects it and frees its place in line', async () => {
    const { fake, wb, c } = harness({ maxPending: 1 })
    fake.fallback = hold
    const first = c.insertOne({ _id: 1 })
    const call = await fake.waitForCalls(1)
    const ac = new AbortController()
    const waiting = settle(c.insertOne({ _id: 2 }, { signal: ac.signal }))
    const behind = c.insertOne({ _id: 3 })
    expect(wb.stats()).toMatchObject({ pending: 1, waiting: 2 })
    ac.abort()
    expect(await waiting).toMatchObject({ status: 'rejected', reason: { code: ErrorCodes.ABORTED, outcome: 'not-sent' } })
    expect(wb.stats()).toMatchObject({ pending: 1, waiting: 1 })
    call.answer()
    ;(await fake.waitForCalls(2)).answer()
    await Promise.all([first, behind])
    expect(fake.calls.map(x => x.ids)).toEqual([[1], [3]])
  })

  it('a big write waiting for room that aborts lets a smaller one behind it in at once', HEAVY, async () => {
    const MiB = 1024 * 1024
    const { fake, wb, c } = harness({ maxPending: 100, maxPendingBytes: 17 * MiB })
    fake.fallback = hold
    const w1 = c.insertOne({ _id: 'a', blob: 'x'.repeat(10 * MiB) })
    const first = await fake.waitForCalls(1)
    const ac = new AbortController()
    const big = settle(c.insertOne({ _id: 'b', blob: 'x'.repeat(10 * MiB) }, { signal: ac.signal })) // does not fit: waits
    const small = c.insertOne({ _id: 'c' }) // fits, but waits behind it (FIFO)
    expect(wb.stats()).toMatchObject({ pending: 1, waiting: 2 })
    ac.abort()
    expect(await big).toMatchObject({ status: 'rejected', reason: { code: ErrorCodes.ABORTED } })
    expect(wb.stats()).toMatchObject({ pending: 2, waiting: 0 }) // admitted at once, not when the first settles
    fake.fallback = apply
    first.answer()
    await Promise.all([w1, small])
    expect(fake.calls.map(x => x.ids)).toEqual([['a'], ['c']])
  })

  it('aborting a write already on the wire changes nothing: its caller gets the real answer', async () => {
    const { fake, c } = harness()
    fake.next(hold)
    const ac = new AbortController()
    const w = track(c.insertOne({ _id: 1 }, { signal: ac.signal }))
    const call = await fake.waitForCalls(1)
    ac.abort()
    await pause(5)
    expect(w.done).toBe(false)
    call.answer()
    expect(await w.promise).toEqual({ status: 'fulfilled', value: { insertedId: 1 } })
  })
})

describe('close()', () => {
  it('after closeTimeoutMs, rejects queued and waiting writes (CLOSED, not-sent); the in-flight one settles when answered', async () => {
    const { fake, wb, c } = harness({ maxInFlight: 1, maxPending: 2, closeTimeoutMs: 50 })
    fake.fallback = hold
    const inFlight = track(c.insertOne({ _id: 1 }))
    const call = await fake.waitForCalls(1)
    const queued = settle(c.insertOne({ _id: 2 }))
    const waiting = settle(c.insertOne({ _id: 3 }))
    expect(wb.stats()).toMatchObject({ pending: 2, waiting: 1, inFlight: 1 })

    await wb.close()
    expect(wb.closed).toBe(true)
    for (const s of await Promise.all([queued, waiting])) {
      expect(s.status === 'rejected' && s.reason).toBeInstanceOf(WriteBufferError)
      expect(s).toMatchObject({ status: 'rejected', reason: { code: ErrorCodes.CLOSED, outcome: 'not-sent', attempts: 0 } })
    }
    expect(inFlight.done).toBe(false)
    expect(fake.calls).toHaveLength(1)

    call.answer()
    expect(await inFlight.promise).toEqual({ status: 'fulfilled', value: { insertedId: 1 } })
    expect(wb.stats()).toMatchObject({ pending: 0, waiting: 0, inFlight: 0 })
    expect(fake.calls).toHaveLength(1) // nothing sent after close
  })

  it('a bulkWrite still on the wire when close() timed out, failing transiently afterwards, is not sent again', async () => {
    const { fake, wb, c } = harness({ closeTimeoutMs: 30, retry: { baseDelayMs: 1 } })
    fake.fallback = hold
    const w = settle(c.insertOne({ _id: 1 }))
    const call = await fake.waitForCalls(1)
    await wb.close() // gives up on the in-flight one after 30 ms
    call.answer(rejectWith(networkError))
    expect(await w).toMatchObject({ status: 'rejected', reason: { code: ErrorCodes.CLOSED, outcome: 'unknown', attempts: 1 } })
    await pause(20)
    expect(fake.calls).toHaveLength(1)
  })

  it('a write waiting to be retried when close() times out ends CLOSED with outcome unknown', async () => {
    const { fake, wb, c } = harness({ closeTimeoutMs: 30, retry: { baseDelayMs: 5_000, maxDelayMs: 5_000 } })
    fake.next(rejectWith(networkError))
    const w = settle(c.updateOne({ _id: 1 }, { $set: { a: 1 } }))
    await fake.waitForCalls(1)
    await pause(5)
    expect(wb.stats().retries).toBe(1)
    await wb.close()
    expect(await w).toMatchObject({ status: 'rejected', reason: { code: ErrorCodes.CLOSED, outcome: 'unknown', attempts: 1 } })
    expect(fake.calls).toHaveLength(1)
  })

  it('drains what is queued before resolving, and refuses writes after it', async () => {
    const { fake, wb, c } = harness()
    const w = c.insertOne({ _id: 1 })
    await wb.close()
    await expect(w).resolves.toEqual({ insertedId: 1 })
    expect(fake.calls).toHaveLength(1)
    const after = await settle(c.insertOne({ _id: 2 }))
    expect(after).toMatchObject({ status: 'rejected', reason: { code: ErrorCodes.CLOSED, outcome: 'not-sent' } })
    expect(fake.calls).toHaveLength(1)
  })
})
