import { describe, expect, it, vi } from 'vitest'
import { ErrorCodes, WriteBufferError } from '../../src/index.js'
import { ServiceRate, MIN_SPAN_MS, SLACK, STALE_MS } from '../../src/buffer/service-rate.js'
import { hold, settle, type BulkCall } from './fake-db.js'
import { harness, type Harness } from './harness.js'

describe('the service rate (service-rate.ts), on a fake clock', () => {
  /** `n` batches of `writes`, `everyMs` apart, each leaving a backlog behind it */
  function backlog (rate: ServiceRate, from: number, n: number, writes: number, everyMs: number): number {
    let now = from
    for (let i = 0; i < n; i++) rate.acknowledged(writes, true, now += everyMs)
    return now
  }

  it('measures writes acknowledged per ms only over a backlogged stretch of MIN_SPAN_MS or more', () => {
    const rate = new ServiceRate()
    let now = backlog(rate, 0, 5, 10, 100) // 400 ms of stretch: not yet
    expect(rate.measured).toBe(false)
    expect(rate.refuses(100, 1_000_000, now)).toBe(false)
    now = backlog(rate, now, 10, 10, 100)
    expect(rate.measured).toBe(true)
    expect(rate.perMs(now)).toBeCloseTo(0.1, 5)
    // 200 ms left: the writes ahead may need up to SLACK × 200 ms, 20 writes at 0.1 per ms
    expect(rate.refuses(200, 20, now)).toBe(false)
    expect(rate.refuses(200, 21, now)).toBe(true)
    expect(0.1 * 200 * SLACK).toBe(20)
  })

  it('a batch acknowledged with no backlog behind it ends the stretch: the queue drains fine, nothing is refused', () => {
    const rate = new ServiceRate()
    let now = backlog(rate, 0, 20, 10, 100)
    expect(rate.refuses(200, 1000, now)).toBe(true)
    rate.acknowledged(10, false, now += 100)
    expect(rate.measured).toBe(false)
    expect(rate.refuses(200, 1000, now)).toBe(false)
    // a new stretch starts from nothing
    now = backlog(rate, now, 5, 10, 100)
    expect(rate.refuses(200, 1000, now)).toBe(false)
  })

  it('a rate older than STALE_MS refuses nothing (a stall, a fence: the deadlines tell those writes)', () => {
    const rate = new ServiceRate()
    const now = backlog(rate, 0, 20, 10, 100)
    expect(rate.refuses(200, 1000, now + STALE_MS - 1)).toBe(true)
    expect(rate.refuses(200, 1000, now + STALE_MS)).toBe(false)
  })

  it('a write without a deadline (0 ms left) or with nothing ahead is never refused', () => {
    const rate = new ServiceRate()
    const now = backlog(rate, 0, 20, 10, 100)
    expect(rate.refuses(0, 1_000_000, now)).toBe(false)
    expect(rate.refuses(1, 0, now)).toBe(false)
  })

  it('follows the rate of the last one to two seconds', () => {
    const rate = new ServiceRate()
    let now = backlog(rate, 0, 30, 10, 100) // 0.1 per ms
    now = backlog(rate, now, 30, 10, 10) // ten times faster for 300 ms
    expect(rate.perMs(now)).toBeGreaterThan(0.3)
    expect(MIN_SPAN_MS).toBe(1_000)
  })
})

describe('shedding at admission (WRITE_BUFFER_SHED)', () => {
  /** Fakes the buffer's clocks (Date, performance, timers); setImmediate and microtasks stay real, so sending works. */
  function fakeClocks (): void {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date', 'performance'] })
  }

  /**
   * Holds every bulkWrite, then answers `n` of them, one per `everyMs` of fake time: the
   * buffer drains maxBatchSize writes per `everyMs` while 300 writes wait behind.
   */
  async function drainSlowly (h: Harness, n: number, everyMs: number): Promise<void> {
    for (let i = 1; i <= n; i++) {
      const call: BulkCall = await h.fake.waitForCalls(i)
      vi.advanceTimersByTime(everyMs)
      call.answer()
    }
    await h.fake.waitForCalls(n + 1)
  }

  /** Answers every bulkWrite at once until nothing is pending. */
  async function drainAll (h: Harness): Promise<void> {
    while (h.wb.stats().pending > 0) {
      for (const call of h.fake.held) call.answer()
      await new Promise<void>(resolve => setImmediate(resolve))
    }
  }

  it('refuses a write whose deadline the writes ahead would outlast at the rate the server serves the buffer while backlogged: not-sent, 503 + retry-after', async () => {
    fakeClocks()
    const h = harness({ maxBatchSize: 10, inFlightLimit: 'fixed', maxInFlight: 1 })
    h.fake.fallback = hold
    const backlog = Array.from({ length: 300 }, (_, i) => h.c.insertOne({ i }))
    await drainSlowly(h, 15, 100) // 10 writes per 100 ms for 1.5 s, 150 left queued or out
    const queued = 300 - 16 * 10
    // 200 ms left: 40 writes ahead at most may wait before it; 140 do
    const shed = await settle(h.c.insertOne({ late: 1 }, { timeoutMs: 200 }))
    expect(shed.status).toBe('rejected')
    if (shed.status === 'rejected') {
      expect(shed.reason).toBeInstanceOf(WriteBufferError)
      expect(shed.reason).toMatchObject({ code: ErrorCodes.SHED, outcome: 'not-sent', attempts: 0, statusCode: 503, headers: { 'retry-after': '1' } })
      expect(String(shed.reason.message)).toContain(`${queued} writes ahead`)
    }
    // 10 s left: 2,000 writes could go before it; kept. No deadline: kept
    const kept = [h.c.insertOne({ late: 2 }, { timeoutMs: 10_000 }), h.c.insertOne({ late: 3 })]
    expect(h.wb.stats()).toMatchObject({ shedOps: 1, pending: 300 - 150 + 2 })
    // drain it all: the shed write never joined a batch
    await drainAll(h)
    await Promise.all([...backlog, ...kept])
    expect(h.fake.calls.flatMap(c => c.bodies).filter(b => (b.document as { late?: number } | undefined)?.late !== undefined).map(b => (b.document as { late: number }).late)).toEqual([2, 3])
  })

  it('a queue full by bytes (not by count) is backlogged too: the rate is measured and a write that would expire queued is shed (review: only maxBatchSize counted)', async () => {
    fakeClocks()
    const h = harness({ maxBatchSize: 1000, maxBatchBytes: 1024, inFlightLimit: 'fixed', maxInFlight: 1 })
    h.fake.fallback = hold
    const pad = 'x'.repeat(100) // about 9 writes fill 1 KiB: batches are full by bytes, never by count
    const backlog = Array.from({ length: 300 }, (_, i) => h.c.insertOne({ i, pad }))
    await drainSlowly(h, 15, 100)
    const shed = await settle(h.c.insertOne({ late: 1, pad }, { timeoutMs: 200 }))
    expect(shed.status === 'rejected' ? (shed.reason as { code?: unknown }).code : 'kept').toBe(ErrorCodes.SHED)
    await drainAll(h)
    await Promise.all(backlog)
  })

  it('never sheds while the queue drains fine: a burst after a quiet time waits, whatever its size', async () => {
    fakeClocks()
    const h = harness({ maxBatchSize: 10, inFlightLimit: 'fixed', maxInFlight: 1 })
    h.fake.fallback = hold
    // quiet: one write at a time, nothing left behind its batch
    for (let i = 0; i < 20; i++) {
      const w = h.c.insertOne({ quiet: i })
      const call = await h.fake.waitForCalls(i + 1)
      vi.advanceTimersByTime(100)
      call.answer()
      await w
    }
    // then a burst with deadlines: the rate of the quiet time would call them late; none is shed
    const burst = Array.from({ length: 300 }, (_, i) => settle(h.c.insertOne({ i }, { timeoutMs: 200 })))
    expect(h.wb.stats().shedOps).toBe(0)
    await drainAll(h)
    expect((await Promise.all(burst)).every(r => r.status === 'fulfilled')).toBe(true)
  })

  it('no shedding once the backlog is gone, nor for a write without a deadline', async () => {
    fakeClocks()
    const h = harness({ maxBatchSize: 10, inFlightLimit: 'fixed', maxInFlight: 1 })
    h.fake.fallback = hold
    const backlog = Array.from({ length: 300 }, (_, i) => h.c.insertOne({ i }))
    await drainSlowly(h, 15, 100)
    // no deadline: never shed, however long the queue
    const noDeadline = h.c.insertOne({ none: 1 })
    expect(h.wb.stats().shedOps).toBe(0)
    // drain at once: the last batches leave no backlog behind them
    await drainAll(h)
    await Promise.all([...backlog, noDeadline])
    const w = settle(h.c.insertOne({ after: 1 }, { timeoutMs: 200 }))
    await drainAll(h)
    expect((await w).status).toBe('fulfilled')
    expect(h.wb.stats().shedOps).toBe(0)
  })
})
