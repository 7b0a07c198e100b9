import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it, vi } from 'vitest'
import type { Db } from 'mongodb'
import { WriteBuffer, type WriteBufferOptions } from '../../src/index.js'
import { apply, hold, pause, track } from './fake-db.js'
import { advance, fastForward, harness, useFakeClock } from './harness.js'
import { joinable } from '../../src/buffer/lingering.js'
import { FakeClock } from './fake-clock.js'

/** Every bulkWrite is recorded (models as sent) and answered by `answer` (default: ok). */
function fakeDb (answer: (n: number) => unknown = () => ({ upsertedIds: {} })) {
  const calls: Array<{ at: number, models: unknown[] }> = []
  const db = {
    collection: (name: string) => ({
      collectionName: name,
      bulkWrite: async (models: unknown[]) => {
        calls.push({ at: Date.now(), models: structuredClone(models) })
        const out = answer(calls.length)
        if (out instanceof Error) throw out
        return await out
      },
      find: () => ({ toArray: async () => [] }),
    }),
  } as unknown as Db
  return { db, calls }
}

function networkError (): Error {
  return Object.defineProperty(new Error('connection 1 closed'), 'name', { value: 'MongoNetworkError' })
}

/** Timers that keep the event loop alive (unref'd ones are not listed). */
function liveTimers (): number {
  return process.getActiveResourcesInfo().filter(r => r === 'Timeout').length
}

const settledState = (p: Promise<unknown>): (() => string) => {
  let s = 'pending'
  p.then(() => { s = 'acknowledged' }, (e: { code?: string }) => { s = `rejected ${String(e.code)}` })
  return () => s
}

describe('lingering writes: the rules around them', () => {
  it('aborting a write already coalesced into a lingering one: it goes with it, and its caller gets the real result', async () => {
    const { db, calls } = fakeDb()
    const wb = new WriteBuffer(db)
    const c = wb.collection('c')
    const leader = c.updateOne({ _id: 1 }, { $set: { a: 1 } }, { lingerMs: 30 })
    const ac = new AbortController()
    const follower = c.updateOne({ _id: 1 }, { $set: { b: 1 } }, { signal: ac.signal }) // joins the leader as it arrives
    ac.abort()
    await expect(Promise.all([leader, follower])).resolves.toEqual([{}, {}])
    expect(calls.map(x => x.models)).toEqual([[{ updateOne: { filter: { _id: 1 }, update: { $set: { a: 1, b: 1 } } } }]])
    expect(wb.stats()).toMatchObject({ pending: 0, flushedOps: 2, failedOps: 0 })
    await wb.close()
  })

  it('a write that joins a lingering one with an earlier deadline brings the send forward to it', async () => {
    const { db, calls } = fakeDb()
    const wb = new WriteBuffer(db)
    const c = wb.collection('c')
    const t0 = Date.now()
    const leader = c.updateOne({ _id: 1 }, { $inc: { n: 1 } }, { lingerMs: 5_000 })
    const follower = c.updateOne({ _id: 1 }, { $inc: { n: 1 } }, { timeoutMs: 100 })
    await expect(Promise.all([leader, follower])).resolves.toEqual([{}, {}])
    expect(calls).toHaveLength(1)
    expect((calls[0]?.at ?? Infinity) - t0).toBeLessThan(1_000) // by the follower's deadline, not the leader's linger
    await wb.close()
  })

  it('a lingering write whose own timeoutMs is shorter than its linger is sent in time, not timed out', async () => {
    const { db, calls } = fakeDb()
    const wb = new WriteBuffer(db)
    const t0 = Date.now()
    await expect(wb.collection('c').updateOne({ _id: 1 }, { $inc: { n: 1 } }, { lingerMs: 5_000, timeoutMs: 200 })).resolves.toEqual({})
    expect(Date.now() - t0).toBeLessThan(1_000)
    expect(calls).toHaveLength(1)
    await wb.close()
  })

  it('on an ordered collection a lingering write is sent when its linger ends, not only on flush()', async () => {
    const { db, calls } = fakeDb()
    const wb = new WriteBuffer(db)
    const t0 = Date.now()
    await wb.collection('c', { ordered: true }).updateOne({ _id: 1 }, { $inc: { n: 1 } }, { lingerMs: 100 })
    expect(Date.now() - t0).toBeGreaterThanOrEqual(90)
    expect(calls).toHaveLength(1)
    await wb.close()
  })

  it('close() sends at once a lingering write that was still waiting for room when it began', async () => {
    const { db, calls } = fakeDb(async () => { await sleep(30); return { upsertedIds: {} } })
    const wb = new WriteBuffer(db, { maxPending: 1, closeTimeoutMs: 2_000 })
    const c = wb.collection('c')
    const first = c.updateOne({ _id: 1 }, { $set: { a: 1 } })
    const waiting = c.updateOne({ _id: 2 }, { $set: { b: 1 } }, { lingerMs: 60_000 }) // no room yet
    const t0 = Date.now()
    await wb.close()
    expect(Date.now() - t0).toBeLessThan(1_000)
    await expect(Promise.all([first, waiting])).resolves.toEqual([{}, {}])
    expect(calls).toHaveLength(2)
  })

  it('once nothing lingers, no linger timer keeps the process alive', async () => {
    // the timers of a minute the buffer arms, watched through the globals it calls (counting
    // every timer of the process counted other tests' timers too: it failed once under load)
    const long = new Set<NodeJS.Timeout>()
    const realSet = globalThis.setTimeout
    const realClear = globalThis.clearTimeout
    const set = vi.spyOn(globalThis, 'setTimeout').mockImplementation(((fn: () => void, ms?: number) => {
      const t = realSet(fn, ms)
      if ((ms ?? 0) >= 50_000) long.add(t)
      return t
    }) as unknown as typeof setTimeout)
    const clear = vi.spyOn(globalThis, 'clearTimeout').mockImplementation((t?: NodeJS.Timeout | string | number) => {
      long.delete(t as NodeJS.Timeout)
      realClear(t)
    })
    const keepingAlive = (): number => [...long].filter(t => t.hasRef()).length
    try {
      const { db } = fakeDb()
      const wb = new WriteBuffer(db)
      const write = wb.collection('c').updateOne({ _id: 1 }, { $set: { a: 1 } }, { lingerMs: 60_000 })
      await sleep(5)
      expect(keepingAlive()).toBe(1) // lingering: a process awaiting it must not exit
      await wb.flush()
      await write
      expect(keepingAlive()).toBe(0)
      await wb.close()
    } finally {
      set.mockRestore()
      clear.mockRestore()
    }
  })
})

describe('after a flush', () => {
  it('a lingering write made right after `await flush()` lingers (the flush is over)', async () => {
    const { db, calls } = fakeDb()
    const wb = new WriteBuffer(db)
    const c = wb.collection('c')
    const pending = c.updateOne({ _id: 1 }, { $set: { a: 1 } })
    await wb.flush() // it had something to wait for
    const t0 = Date.now()
    await c.updateOne({ _id: 9 }, { $set: { x: 1 } }, { lingerMs: 200 }) // made in the flush's own continuation
    await pending
    expect(Date.now() - t0).toBeGreaterThanOrEqual(150)
    expect(calls).toHaveLength(2)
    await wb.close()
  })

  it('expired writes of one deadline sweep, one of them let in by another\'s rejection, leave no count behind', async () => {
    let release: () => void = () => {}
    const gate = new Promise<void>(resolve => { release = resolve })
    const { db } = fakeDb(n => (n === 1 ? gate.then(() => ({ upsertedIds: {} })) : { upsertedIds: {} }))
    const wb = new WriteBuffer(db, { maxPending: 2 })
    const c = wb.collection('c')
    const inFlight = c.updateOne({ _id: 1 }, { $set: { a: 1 } })
    await sleep(5)
    const expiring = [
      c.updateOne({ _id: 1 }, { $set: { a: 2 } }, { timeoutMs: 100 }), // queued behind the one in flight
      c.updateOne({ _id: 2 }, { $set: { a: 1 } }, { timeoutMs: 100 }), // waiting for room
      c.updateOne({ _id: 3 }, { $set: { a: 1 } }, { timeoutMs: 100 }), // waiting for room
    ].map(p => p.then(() => 'acknowledged', (e: { code?: string }) => String(e.code)))
    expect(await Promise.all(expiring)).toEqual(['WRITE_BUFFER_TIMEOUT', 'WRITE_BUFFER_TIMEOUT', 'WRITE_BUFFER_TIMEOUT'])
    release()
    await inFlight
    const more = c.updateOne({ _id: 5 }, { $set: { f: 1 } })
    await wb.flush() // a flush that waits for something
    await more
    expect(wb.stats()).toMatchObject({ pending: 0, waiting: 0 })
    // nothing is left counted in the queue: a lingering write lingers again (a leaked count kept the buffer flushing)
    const t0 = Date.now()
    await c.updateOne({ _id: 9 }, { $set: { x: 1 } }, { lingerMs: 200 })
    expect(Date.now() - t0).toBeGreaterThanOrEqual(150)
    await wb.close()
  })

  it('close() leaves no fence keeping the process alive', async () => {
    const { db } = fakeDb(n => (n === 1 ? networkError() : { upsertedIds: {} }))
    const before = liveTimers()
    const wb = new WriteBuffer(db, { maxTimeMS: 5_000, retry: { maxAttempts: 1 } })
    await expect(wb.collection('c').updateOne({ _id: 1 }, { $inc: { n: 1 } })).rejects.toMatchObject({ outcome: 'unknown' })
    expect(liveTimers()).toBeGreaterThan(before) // fenced for maxTimeMS + 1 s
    await wb.close()
    expect(liveTimers()).toBe(before)
  })
})

describe('dispatch with a global lingerMs and a write held back', () => {
  it('a write fenced after an ambiguous failure does not stop other documents from going after lingerMs', async () => {
    const { db, calls } = fakeDb(n => (n === 1 ? networkError() : { upsertedIds: {} }))
    const options: WriteBufferOptions = { lingerMs: 10, maxTimeMS: 500, retry: { maxAttempts: 1 } }
    const wb = new WriteBuffer(db, options)
    const c = wb.collection('c')
    await expect(c.updateOne({ _id: 1 }, { $inc: { n: 1 } })).rejects.toMatchObject({ outcome: 'unknown' })
    const behindFence = settledState(c.updateOne({ _id: 1 }, { $set: { x: 1 } })) // waits ~1.5 s: expected
    await sleep(50)
    const t0 = Date.now()
    await c.updateOne({ _id: 2 }, { $set: { y: 1 } })
    expect(Date.now() - t0).toBeLessThan(1_000) // not held until the fence ends (1.5 s)
    expect(behindFence()).toBe('pending')
    expect(calls).toHaveLength(2)
    await wb.close()
  })

  it('a fence keeps the process alive while a write waits behind it', async () => {
    const { db } = fakeDb(n => (n === 1 ? networkError() : { upsertedIds: {} }))
    const before = liveTimers()
    const wb = new WriteBuffer(db, { maxTimeMS: 50, retry: { maxAttempts: 1 } })
    const c = wb.collection('c')
    await expect(c.updateOne({ _id: 1 }, { $inc: { n: 1 } })).rejects.toMatchObject({ outcome: 'unknown' })
    const behind = c.updateOne({ _id: 1 }, { $set: { x: 1 } })
    await sleep(5)
    expect(liveTimers()).toBeGreaterThan(before)
    await expect(behind).resolves.toEqual({})
    await wb.close()
  })
})

describe('a write joins a lingering one only when it can travel with it', () => {
  it('a write with a deadline does not join a lingering write without one: each keeps its own deadline', async () => {
    const { fake, c } = harness()
    fake.fallback = hold
    const stuck = track(c.updateOne({ _id: 1 }, { $set: { a: 1 } }, { upsert: true })) // on the wire until answered
    await pause(5)
    const lingering = track(c.updateOne({ _id: 1 }, { $set: { b: 1 } }, { lingerMs: 1000 }))
    const hurried = track(c.updateOne({ _id: 1 }, { $set: { c: 1 } }, { timeoutMs: 150 }))
    await pause(400)
    // it joined the lingering write and was sent with it at 3 s, told acknowledged: its deadline ignored
    expect(await hurried.promise).toMatchObject({ status: 'rejected', reason: { code: 'WRITE_BUFFER_TIMEOUT', outcome: 'not-sent' } })
    fake.fallback = apply
    for (const call of fake.held) call.answer()
    await expect(lingering.promise).resolves.toMatchObject({ status: 'fulfilled' })
    expect((await stuck.promise).status).toBe('fulfilled')
    expect(fake.docs('c')).toEqual([{ _id: 1, a: 1, b: 1 }])
  })

  it('a write without a deadline that joins a lingering write with one is not timed out with it', async () => {
    const { fake, c } = harness()
    fake.fallback = hold
    const stuck = track(c.updateOne({ _id: 1 }, { $set: { a: 1 } }, { upsert: true }))
    await pause(5)
    const lingering = track(c.updateOne({ _id: 1 }, { $set: { b: 1 } }, { lingerMs: 1000, timeoutMs: 100 }))
    const patient = track(c.updateOne({ _id: 1 }, { $set: { c: 1 } }))
    await pause(300)
    expect(await lingering.promise).toMatchObject({ status: 'rejected', reason: { code: 'WRITE_BUFFER_TIMEOUT' } })
    expect(patient.done).toBe(false) // it was rejected WRITE_BUFFER_TIMEOUT with the write it had joined
    fake.fallback = apply
    for (const call of fake.held) call.answer()
    await expect(patient.promise).resolves.toMatchObject({ status: 'fulfilled' })
    expect((await stuck.promise).status).toBe('fulfilled')
    expect(fake.docs('c')).toEqual([{ _id: 1, a: 1, c: 1 }])
  })
})

describe('lingering writes with deadlines still merge', () => {
  it('with writeTimeoutMs, writes to one document within a linger merge as without it (each deadline is its own millisecond)', async () => {
    // 2 ms apart on the fake clock: in real time a busy machine stretched the 60 pauses past the
    // 300 ms linger, and the counts followed the machine (2 against 3, 2 against 1)
    useFakeClock()
    const statements = async (options: WriteBufferOptions): Promise<number> => {
      const { fake, c, wb } = harness(options)
      const writes: Array<Promise<unknown>> = []
      for (let i = 0; i < 60; i++) {
        writes.push(c.updateOne({ _id: 1 }, { $inc: { n: 1 } }, { upsert: true, lingerMs: 300 }))
        await advance(2) // and the turn in which the buffer sends
      }
      expect((await fastForward(Promise.all(writes))).status).toBe('fulfilled')
      await wb.flush()
      expect(fake.docs('c')).toEqual([{ _id: 1, n: 60 }])
      return fake.calls.reduce((n, call) => n + call.models.length, 0)
    }
    const none = await statements({})
    const timed = await statements({ writeTimeoutMs: 10_000 })
    expect(none).toBeLessThanOrEqual(3)
    expect(timed).toBe(none) // was 60: one statement per write, each waiting out its own linger
  })
})

describe('joinable: whose deadline a lingering write can carry', () => {
  it('none with none; a later deadline by no more than the leader has left; never none with one, nor an earlier one', () => {
    const clock = new FakeClock()
    const now = clock.now()
    expect(joinable(0, 0, clock)).toBe(true)
    expect(joinable(now + 10_050, now + 10_000, clock)).toBe(true) // writeTimeoutMs: 50 ms later
    expect(joinable(now + 60_000, now + 100, clock)).toBe(false) // it would time out 59.9 s early with the leader
    expect(joinable(now + 100, now + 10_000, clock)).toBe(false) // its deadline first: it stays behind
    expect(joinable(0, now + 100, clock)).toBe(false)
    expect(joinable(now + 100, 0, clock)).toBe(false)
  })
})
