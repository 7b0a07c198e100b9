import { describe, expect, it } from 'vitest'
import { GROW_AT, InFlightLimit, INITIAL_LIMIT, SHRINK_AT, WINDOW_MS } from '../../src/buffer/in-flight-limit.js'

// The rule of the in-flight limit, driven by a fake clock (`now` is passed in: the module reads
// none). Each test below fails if the limit stayed fixed at its ceiling (maxInFlight): it asserts
// a value under the ceiling, or a move.

const CEILING = 16

/** The clock the tests move by hand (ms). */
let now = 0

/**
 * One round: as many acknowledged batches as the limit, each of `writes` writes taking
 * `perWriteMs` per write, with every slot in use (unless `inFlight` says otherwise).
 */
function round (limit: InFlightLimit, perWriteMs: number, { writes = 100, inFlight = limit.value }: { writes?: number, inFlight?: number } = {}): number {
  const answers = limit.value
  for (let i = 0; i < answers; i++) {
    now += perWriteMs * writes / answers
    limit.sample(perWriteMs * writes, writes, inFlight, now)
  }
  return limit.value
}

function rounds (limit: InFlightLimit, n: number, perWriteMs: number, options?: { writes?: number, inFlight?: number }): number[] {
  return Array.from({ length: n }, () => round(limit, perWriteMs, options))
}

describe('the adaptive in-flight limit (in-flight-limit.ts)', () => {
  it('starts at 4 and grows one slot per round while the time per write stays at the least seen, up to the ceiling', () => {
    const limit = new InFlightLimit(CEILING, true)
    expect(limit.value).toBe(INITIAL_LIMIT)
    expect(rounds(limit, 14, 0.05)).toEqual([5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 16, 16])
  })

  it('shrinks by a quarter per round while more than SHRINK_AT batches are estimated queued (Vegas: limit × (1 − least / time per write)), then holds', () => {
    const limit = new InFlightLimit(CEILING, true)
    rounds(limit, 8, 0.05)
    expect(limit.value).toBe(12)
    // three times the least: 12 × 2/3 = 8 queued → 9; 9 × 2/3 = 6 queued: no more than SHRINK_AT
    expect(rounds(limit, 4, 0.15)).toEqual([9, 9, 9, 9])
    // ten times: 9 × 0.9 = 8.1 → 6; 6 × 0.9 = 5.4 → holds
    expect(rounds(limit, 3, 0.5)).toEqual([6, 6, 6])
    expect(6 * 0.9).toBeGreaterThan(GROW_AT)
    expect(6 * 0.9).toBeLessThanOrEqual(SHRINK_AT)
  })

  it('a server that only queues (one worker: time per write grows with the batches out) keeps a few slots, not one and not the ceiling', () => {
    const limit = new InFlightLimit(CEILING, true)
    const service = 0.05
    const seen: number[] = []
    // each batch waits for the ones ahead of it: time per write = batches out × service
    for (let r = 0; r < 40; r++) seen.push(round(limit, limit.value * service))
    const settled = seen.slice(20)
    expect(Math.min(...settled)).toBeGreaterThan(1)
    expect(Math.max(...settled)).toBeLessThan(CEILING)
  })

  it('holds between the two thresholds: neither more slots nor fewer', () => {
    const limit = new InFlightLimit(CEILING, true)
    rounds(limit, 2, 0.05)
    expect(limit.value).toBe(6)
    // 6 × (1 − 1/4) = 4.5 batches queued: more than GROW_AT, no more than SHRINK_AT
    expect(rounds(limit, 5, 0.05 * 4)).toEqual([6, 6, 6, 6, 6])
  })

  it('measures per write, not per batch: batches twice as big taking twice as long are no queueing', () => {
    const limit = new InFlightLimit(CEILING, true)
    const sizes = [10, 20, 40, 80, 160, 320]
    // the batch's round trip doubles each round, its time per write stays the same
    expect(sizes.map(writes => round(limit, 0.05, { writes }))).toEqual([5, 6, 7, 8, 9, 10])
  })

  it('halves at once when the server says it is overloaded, once per round however many batches say so', () => {
    const limit = new InFlightLimit(CEILING, true)
    rounds(limit, 4, 0.05)
    expect(limit.value).toBe(8)
    limit.overloaded(now)
    expect(limit.value).toBe(4)
    // the other batches of the same round meet the same overload: one cause, one halving
    limit.overloaded(now)
    limit.overloaded(now)
    expect(limit.value).toBe(4)
    // the round ends (4 answers), and the next overload halves again, down to 1 and no further
    limit.overloaded(now)
    expect(limit.value).toBe(4)
    for (const expected of [2, 2, 1, 1]) {
      limit.overloaded(now)
      expect(limit.value).toBe(expected)
    }
    expect(limit.shrunk).toBe(3)
  })

  it('batches sent before the limit halved met the overload that halved it: their answers halve it no further, however many rounds they fill (review: one burst took 8 to 1)', () => {
    const limit = new InFlightLimit(CEILING, true)
    rounds(limit, 4, 0.05)
    expect(limit.value).toBe(8)
    const sentAt = now
    now += 10
    // eight batches out when the server turns them all away: the first halves, the seven others were sent before
    for (let i = 0; i < 8; i++) limit.overloaded(now + i, sentAt)
    expect(limit.value).toBe(4)
    expect(limit.shrunk).toBe(1)
    // a batch sent after the halving that meets an overload again halves it again
    limit.overloaded(now + 20, now + 15)
    expect(limit.value).toBe(2)
  })

  it('recovers after an overload: one slot per round while round trips stay near the least', () => {
    const limit = new InFlightLimit(CEILING, true)
    rounds(limit, 6, 0.05)
    expect(limit.value).toBe(10)
    for (let i = 0; i < 6; i++) limit.overloaded(now) // two rounds of overload answers: 10 → 5 → 2
    expect(limit.value).toBe(2)
    // the round in which it halved moves nothing else; then it grows back, a slot per round
    const back = rounds(limit, 9, 0.05)
    expect(back.slice(0, 2)).toEqual([2, 3])
    expect(back.slice(2)).toEqual([4, 5, 6, 7, 8, 9, 10])
  })

  it('moves nothing while the limit is not nearly used (an idle or lone collection): such a round measured the load', () => {
    const limit = new InFlightLimit(CEILING, true)
    rounds(limit, 2, 0.05)
    expect(limit.value).toBe(6)
    // one batch out at a time, round trips per write growing tenfold or staying flat: no move
    expect(rounds(limit, 4, 0.5, { inFlight: 1 })).toEqual([6, 6, 6, 6])
    expect(rounds(limit, 4, 0.05, { inFlight: 2 })).toEqual([6, 6, 6, 6])
    // half of it in use counts
    expect(round(limit, 0.05, { inFlight: 3 })).toBe(7)
  })

  it('follows a server that became slower for good: the least seen is of the last one to two windows', () => {
    const limit = new InFlightLimit(CEILING, true)
    rounds(limit, 4, 0.05)
    expect(limit.value).toBe(8)
    // ten times slower from now on: 8 × 0.9 = 7.2 queued → 6, then it holds while the old least counts
    expect(rounds(limit, 4, 0.5)).toEqual([6, 6, 6, 6])
    now += 2 * WINDOW_MS
    // the old least has aged out: the new time per write is the least, and it grows again
    expect(rounds(limit, 3, 0.5)).toEqual([7, 8, 9])
  })
})

describe("inFlightLimit: 'fixed'", () => {
  it('is the ceiling, whatever the round trips or the server say', () => {
    const limit = new InFlightLimit(CEILING, false)
    expect(limit.value).toBe(CEILING)
    rounds(limit, 3, 0.05)
    rounds(limit, 3, 5)
    limit.overloaded(now)
    expect(limit.value).toBe(CEILING)
  })

  it('an adaptive limit never starts above a lower ceiling', () => {
    expect(new InFlightLimit(2, true).value).toBe(2)
  })
})
