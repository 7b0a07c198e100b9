import { describe, expect, it } from 'vitest'
import { DOWN, MAX_GROWTH, MAX_HOLD_MS, OverloadPace, QUIET_MS, RATE_WINDOW_MS, START_JITTER, UP, UP_FIRST } from '../../src/buffer/overload-pace.js'
import { apply, commandError, HOLD, rejectWith, settle, type Responder, type Settled } from './fake-db.js'
import { advance, fastForward, harness, loose, useFakeClock } from './harness.js'

// The overload pace's rule (overload-pace.ts), on a time passed in by hand, then the buffer
// behind a token bucket that answers 462 as MongoDB 8's ingress limiter does, on a fake clock.
// The rule's tests assert a hold, a move or an end; the buffer's, commands sent ÷ accepted,
// shedding, and the pace's end, each failing without the pace (or with it never ending).

/** 1,000 writes acknowledged over the last second, in batches of 100: a rate of 1 write per ms. */
function served (pace: OverloadPace, until: number): void {
  for (let at = until - RATE_WINDOW_MS + 100; at <= until; at += 100) pace.acknowledged(at, 100)
}

/** A token bucket of `perMs` writes per ms holding at most `burst`: a command of n writes passes when it holds n tokens (as bench/overload-proxy-worker.mjs). */
class TokenBucket {
  #tokens: number
  #at: number
  accepted = 0
  refused = 0
  constructor (readonly perMs: number, readonly burst: number, now: number) {
    this.#tokens = burst
    this.#at = now
  }

  /** Whether a command of `writes` writes arriving at `now` passes (it takes its tokens). */
  take (now: number, writes: number): boolean {
    this.#tokens = Math.min(this.burst, this.#tokens + (now - this.#at) * this.perMs)
    this.#at = now
    if (this.#tokens < writes) {
      this.refused++
      return false
    }
    this.#tokens -= writes
    this.accepted++
    return true
  }
}

describe('the overload pace (overload-pace.ts)', () => {
  it('starts at the rate the server acknowledged writes at over the last second; the first refused batch goes again its time at that rate later', () => {
    const pace = new OverloadPace()
    served(pace, 10_000)
    pace.overloaded(10_010, 500, 10_005, 0)
    expect(pace.rate).toBe(1)
    expect(pace.nextAt).toBeCloseTo(10_510, 6)
    const late = new OverloadPace()
    served(late, 10_000)
    late.overloaded(10_010, 500, 10_005, 1)
    expect(late.nextAt).toBeCloseTo(10_510 + START_JITTER * 500, 6)
  })

  it('a batch refused while paced leaves the gate where its send put it: the next batch goes its time at the slowed pace after it went', () => {
    const pace = new OverloadPace()
    served(pace, 10_000)
    pace.overloaded(10_000, 100, 9_990, 0)
    pace.sent(10_100, 500)
    pace.overloaded(10_110, 500, 10_100, 0.5)
    expect(pace.nextAt).toBeCloseTo(10_100 + 500 / DOWN, 6)
  })

  it('nothing acknowledged before (a buffer that met the overload first): starts at the refused batch per second; no batch holds the next back more than MAX_HOLD_MS; each acknowledged probe speeds it by UP_FIRST', () => {
    const pace = new OverloadPace()
    pace.overloaded(0, 10, -5, 0)
    expect(pace.rate).toBe(10 / RATE_WINDOW_MS)
    expect(pace.nextAt).toBe(1_000)
    pace.waited()
    pace.sent(1_000, 1_000) // 100 s at that rate
    expect(pace.nextAt).toBe(1_000 + MAX_HOLD_MS)
    pace.acknowledged(1_010, 1_000)
    expect(pace.rate).toBeCloseTo(UP_FIRST * 10 / RATE_WINDOW_MS, 12)
  })

  it('a speed-up shortens the wait already begun', () => {
    const pace = new OverloadPace()
    served(pace, 10_000)
    pace.overloaded(10_000, 100, 9_990, 0) // 1 write per ms
    pace.waited()
    pace.sent(10_100, 500)
    expect(pace.nextAt).toBe(10_600)
    pace.acknowledged(10_110, 500)
    expect(pace.nextAt).toBeCloseTo(10_100 + 500 / UP_FIRST, 6)
  })

  it('a batch sent holds the next one back its writes ÷ the rate', () => {
    const pace = new OverloadPace()
    served(pace, 10_000)
    pace.overloaded(10_000, 100, 9_990, 0) // the refused batch may go again at 10,100
    pace.sent(10_150, 200)
    expect(pace.nextAt).toBeCloseTo(10_350, 6)
    pace.sent(10_350, 100) // sent as soon as allowed: the next one after that batch's time
    expect(pace.nextAt).toBeCloseTo(10_450, 6)
  })

  it('an acknowledged probe (a batch that had waited for the pace) speeds it up by UP_FIRST until the pace is first slowed, then by UP; a batch that had not waited leaves it', () => {
    const pace = new OverloadPace()
    served(pace, 10_000)
    pace.overloaded(10_000, 100, 9_990, 0.5)
    pace.sent(10_200, 100)
    pace.acknowledged(10_210, 100)
    expect(pace.rate).toBe(1)
    pace.waited()
    pace.sent(10_310, 100)
    pace.acknowledged(10_320, 100)
    expect(pace.rate).toBeCloseTo(UP_FIRST, 9)
    pace.overloaded(10_500, 100, 10_400, 0.5)
    expect(pace.rate).toBeCloseTo(UP_FIRST * DOWN, 9)
    pace.waited()
    pace.sent(10_700, 100)
    pace.acknowledged(10_710, 100)
    expect(pace.rate).toBeCloseTo(UP_FIRST * DOWN * UP, 9)
    expect(pace.sped).toBe(2)
  })

  it('overload answers slow it by DOWN, once per cut: answers to batches sent before the last cut meet the same cause', () => {
    const pace = new OverloadPace()
    served(pace, 10_000)
    pace.overloaded(10_000, 100, 9_990, 0.5) // starts the pace
    pace.overloaded(10_200, 100, 10_150, 0.5) // sent at the pace
    expect(pace.rate).toBeCloseTo(DOWN, 9)
    pace.overloaded(10_205, 100, 10_160, 0.5) // sent before the cut at 10,200: the same cause
    expect(pace.rate).toBeCloseTo(DOWN, 9)
    pace.acknowledged(10_300, 100)
    pace.overloaded(10_500, 100, 10_400, 0.5)
    expect(pace.rate).toBeCloseTo(DOWN * DOWN, 9)
    expect(pace.slowed).toBe(2)
  })

  it('ends QUIET_MS after the last overload answer, at the next acknowledgment; one starting again soon after starts slowed', () => {
    const pace = new OverloadPace()
    served(pace, 10_000)
    pace.overloaded(10_000, 100, 9_990, 0.5)
    pace.waited() // holding batches back does not keep it
    pace.acknowledged(10_000 + QUIET_MS - 1, 10)
    expect(pace.rate).toBe(1)
    pace.acknowledged(10_000 + QUIET_MS, 10)
    expect(pace.rate).toBe(0)
    expect(pace.nextAt).toBe(0)
    pace.overloaded(16_000, 100, 15_990, 0.5)
    expect(pace.slowedSinceStart).toBe(true) // it probes by UP, not UP_FIRST: the rate it restarts from is the last pace's
  })

  it('grows to at most MAX_GROWTH times what was acknowledged over the last second', () => {
    const pace = new OverloadPace()
    served(pace, 10_000)
    pace.overloaded(10_000, 100, 9_990, 0)
    for (let k = 0; k < 50; k++) {
      pace.waited()
      pace.sent(10_100 + k, 1)
      pace.acknowledged(10_100 + k, 1)
    }
    expect(pace.rate).toBeLessThanOrEqual(MAX_GROWTH * 1_050 / RATE_WINDOW_MS)
    expect(pace.rate).toBeGreaterThan(1)
  })

  it('behind a token bucket, always backlogged, batches of one size: about one refusal per ten batches, and ≥ 85% of the bucket\'s rate served', () => {
    // (a refused batch waits its whole time from its send: in this model a resend soon after would
    // serve more, but with batches of varying sizes it cut the pace at refusals it did not earn:
    // bench overload (b) served 0.7x the bucket's rate; overload-pace.ts)
    // the bucket: 1 write per ms, 1,000 at most; a batch of 1,000 passes when the bucket holds 1,000
    const run = (paced: boolean): { goodput: number, sentPerAccepted: number } => {
      const pace = new OverloadPace()
      const bucket = new TokenBucket(1, 1_000, 0)
      let t = 0
      let nextAt = 0
      let seed = 1
      const random = (): number => { seed = (seed * 16807) % 2147483647; return seed / 2147483647 }
      while (t < 300_000) {
        const gate = paced ? pace.nextAt : nextAt
        if (gate > t) { pace.waited(); t = gate }
        const sentAt = t
        pace.sent(t, 1_000)
        t += 2 + 4 * random() // the round trip
        if (bucket.take(sentAt, 1_000)) {
          pace.acknowledged(t, 1_000)
          nextAt = t
        } else {
          pace.overloaded(t, 1_000, sentAt, random())
          nextAt = t + 25 + 25 * random() // without the pace: the first backoff (retry.baseDelayMs 50, jittered)
        }
      }
      return { goodput: (bucket.accepted - 1) * 1_000 / t, sentPerAccepted: (bucket.accepted + bucket.refused) / bucket.accepted }
    }
    const paced = run(true)
    expect(paced.goodput).toBeGreaterThanOrEqual(0.85)
    expect(paced.sentPerAccepted).toBeLessThanOrEqual(1.2)
    const unpaced = run(false)
    expect(unpaced.sentPerAccepted).toBeGreaterThan(10) // a resend every 25-50 ms for a second's worth of tokens
  })
})

describe('the buffer behind a token bucket answering 462 (the pace in the Dispatcher)', () => {
  /**
   * A token bucket of `perMs` writes per ms, `burst` at most, on the fake clock: a command passes
   * when it holds as many tokens as writes. Answered at once, or `rttMs` later (decided on arrival).
   */
  function bucket (now: () => number, perMs: number, burst: number, rttMs = 0): { responder: Responder, accepted: () => number, refused: () => number } {
    const tokens = new TokenBucket(perMs, burst, now())
    const overloaded = (): Error => Object.assign(commandError(462, 'fake IngressRequestRateLimitExceeded'), {
      hasErrorLabel: (l: string) => ['SystemOverloadedError', 'RetryableError', 'NoWritesPerformed'].includes(l),
    })
    const responder: Responder = (call, db) => {
      const answer = tokens.take(now(), call.models.length) ? apply : rejectWith(overloaded)
      if (rttMs === 0) return answer(call, db)
      setTimeout(() => { call.answer(answer) }, rttMs)
      return HOLD
    }
    return { responder, accepted: () => tokens.accepted, refused: () => tokens.refused }
  }

  async function flood (inFlightLimit: 'adaptive' | 'fixed'): Promise<{ sentPerAccepted: number, acknowledged: number, pace: number }> {
    const clock = useFakeClock()
    const { fake, wb, c } = harness({ inFlightLimit, maxInFlight: 4, maxBatchSize: 50, retry: { maxAttempts: 100, baseDelayMs: 50, maxDelayMs: 2_000 } })
    await c.insertOne({ _id: 'warm' }) // an acknowledged batch before the flood
    const b = bucket(() => clock.now(), 0.1, 50) // 100 writes/s
    fake.fallback = b.responder
    const writes = Array.from({ length: 1_000 }, async (_, i) => await settle(c.insertOne({ _id: i })))
    const all = await fastForward(Promise.all(writes))
    if (all.status !== 'fulfilled') throw all.reason
    const results = all.value
    fake.fallback = apply
    return { sentPerAccepted: (b.accepted() + b.refused()) / b.accepted(), acknowledged: results.filter(r => r.status === 'fulfilled').length, pace: wb.stats().overloadPace }
  }

  it('while the pace holds sends back the buffer is backlogged: writes the pace cannot serve before their deadline are shed at the door (WRITE_BUFFER_SHED), not told by their deadline', async () => {
    const clock = useFakeClock()
    // maxBatchSize 1,000 (the default): the queue never holds a full batch (at most a deadline's worth of 3,000 writes/s)
    const { fake, wb, c } = harness({ writeTimeoutMs: 300, retry: { maxAttempts: 100 } })
    await c.insertOne({ _id: 'warm' })
    const b = bucket(() => clock.now(), 1, 1_000, 100) // 1,000 writes/s, a batch's worth at most, answered 100 ms after the command arrives
    fake.fallback = b.responder
    const writes: Array<Promise<Settled<unknown>>> = []
    for (let t = 0; t < 10_000; t += 50) { // open loop: 3,000 writes/s for 10 s (the bucket's first 1,000 last half a second)
      for (let i = 0; i < 150; i++) writes.push(settle(c.insertOne({ _id: `${t}-${i}` })))
      await advance(50)
    }
    const all = await fastForward(Promise.all(writes))
    fake.fallback = apply
    if (all.status !== 'fulfilled') throw all.reason
    const told = (code: string): number => all.value.filter(r => r.status === 'rejected' && r.reason.code === code).length
    expect(told('WRITE_BUFFER_SHED')).toBe(wb.stats().shedOps)
    // none before the pace counted as a backlog (the queue never held a full batch); a share of
    // the rest still wait and time out: a batch the pace lets go takes all that queued meanwhile
    expect(told('WRITE_BUFFER_SHED')).toBeGreaterThan(0.25 * (told('WRITE_BUFFER_SHED') + told('WRITE_BUFFER_TIMEOUT')))
  }, 60_000)

  it('ends once the server stops refusing, under a light load over 8 collections (two batches sent in one turn are no reason to keep it), and a burst after it goes at once', async () => {
    const clock = useFakeClock()
    const { fake, wb, c } = harness({ maxBatchSize: 50, retry: { maxAttempts: 100 } })
    await c.insertOne({ _id: 'warm' })
    fake.fallback = bucket(() => clock.now(), 0.1, 50).responder
    const flood = await fastForward(Promise.all(Array.from({ length: 300 }, async (_, i) => await settle(c.insertOne({ _id: i })))))
    expect(flood.status).toBe('fulfilled')
    expect(wb.stats().overloadPace).toBeGreaterThan(0)
    fake.fallback = apply // the overload is over
    const colls = Array.from({ length: 8 }, (_, k) => loose(wb.collection(`light${k}`)))
    const light: Array<Promise<unknown>> = []
    for (let t = 0; t < QUIET_MS + 2_000; t += 100) {
      for (const [k, coll] of colls.entries()) light.push(coll.insertOne({ _id: `${t}-${k}` }))
      await advance(100)
    }
    await fastForward(Promise.all(light))
    expect(wb.stats().overloadPace).toBe(0)
    const before = fake.calls.length
    const burst = Promise.all(Array.from({ length: 500 }, async (_, i) => await c.insertOne({ _id: `burst${i}` })))
    await advance(0)
    await burst // no timer needed: nothing holds it back
    expect(fake.calls.length - before).toBeLessThanOrEqual(12)
  }, 60_000)

  it('adaptive: every write acknowledged with at most 1.5 commands sent per command accepted; fixed, without the pace: far more', async () => {
    const adaptive = await flood('adaptive')
    expect(adaptive.acknowledged).toBe(1_000)
    expect(adaptive.sentPerAccepted).toBeLessThanOrEqual(1.5)
    // stats().overloadPace: writes per second, near the bucket's 100 (the pace lasts 5 s past the last refusal)
    expect(adaptive.pace).toBeGreaterThan(50)
    expect(adaptive.pace).toBeLessThan(200)
    const fixed = await flood('fixed')
    expect(fixed.sentPerAccepted).toBeGreaterThan(2)
  }, 60_000)
})
