import { TwoWindows } from './two-windows.js'

/**
 * How many batches may be on the wire at once: the rule, pure. It is told each acknowledged
 * batch's round trip and each overload answer, with the time (`now`, in ms, from whatever clock
 * its caller reads: it reads none), and answers `value`, within [1, ceiling] (`maxInFlight`).
 *
 * The rule is Vegas's comparison (Netflix concurrency-limits, Envoy's adaptive concurrency: a
 * round trip near the least seen means nothing queues, one well above it means requests queue
 * somewhere) with AIMD's moves (one more at a time, a fraction less at once):
 * - round trips are compared **per write** (a batch's round trip over its writes): a batch's
 *   own round trip grows with its size, which group commit changes with the load. Per write it
 *   reads as throughput per slot: when one more slot leaves the time per write as it was, it
 *   bought throughput; when the time per write grows with the slots, they only queue;
 * - once per *round* (as many answers as the limit: about one round trip of every slot) the
 *   round's time per write (its round trips summed over its writes summed) is compared with
 *   the least seen over the last one to two WINDOW_MS, as Vegas does: the batches queued
 *   somewhere are about `limit × (1 − least / now)` (a batch's share of the round trip that is
 *   not service). At most GROW_AT queued: one slot more; more than SHRINK_AT: a quarter less
 *   (at least one); between, as it is. So the limit settles where a few batches wait at the
 *   server, whatever the limit: a server that serves more in parallel earns more slots, one
 *   that only queues them keeps a few (a fixed ratio of round trips, tried first, shrank a
 *   one-worker server's limit to 1-2 and lost 16% of its throughput: bench overload (a));
 * - a round in which the limit was not nearly used (fewer than half of it in flight at every
 *   answer) moves nothing: it measured the load, not the limit (an idle or lone collection);
 * - the server saying it is overloaded (462, 463, 473, `SystemOverloadedError`) halves the
 *   limit at once, at most once per round: the batches of one round that meet the same overload
 *   answer for one cause. The limit then grows back one slot per round while round trips stay
 *   near the least.
 *
 * Fixed (`inFlightLimit: 'fixed'`): the value is the ceiling and nothing moves.
 */

/** Batches estimated queued (Vegas: limit × (1 − least / time per write)) at most this many: one slot more. */
export const GROW_AT = 3
/** Batches estimated queued beyond this many: a quarter less. */
export const SHRINK_AT = 6
/** The least time per write is the least of the current window and the previous one: it follows a server that became slower for good within two windows. */
export const WINDOW_MS = 30_000
/** Where the adaptive limit starts (the ceiling if lower): the fixed default of before. */
export const INITIAL_LIMIT = 4

export class InFlightLimit {
  #value: number
  /** least time per write (ms) of a round, in the current window and the previous one */
  readonly #least = new TwoWindows(WINDOW_MS, () => Infinity, -Infinity)
  /** the round being gathered: answers (batches), their round trips (ms) and writes summed */
  #answers = 0
  #ms = 0
  #writes = 0
  /** whether the limit was nearly used at some answer of this round */
  #used = false
  /** the limit was halved in this round (an overload): nothing else moves it until the next */
  #halved = false
  /** when the limit last halved: overload answers to batches sent before it answer the same cause */
  #halvedAt = -Infinity
  /** times the limit moved (stats, tests) */
  grown = 0
  shrunk = 0

  constructor (readonly ceiling: number, readonly adaptive: boolean) {
    this.#value = adaptive ? Math.min(ceiling, INITIAL_LIMIT) : ceiling
  }

  /** Batches that may be on the wire now. */
  get value (): number { return this.#value }

  /**
   * A batch of `writes` writes was acknowledged `ms` after it was sent, with `inFlight` batches
   * on the wire (itself included).
   */
  sample (ms: number, writes: number, inFlight: number, now: number): void {
    if (!this.adaptive || writes <= 0) return
    this.#ms += ms
    this.#writes += writes
    if (2 * inFlight >= this.#value) this.#used = true
    if (++this.#answers >= this.#value) this.#endRound(now)
  }

  /**
   * The server answered a batch sent at `sentAt` that it is overloaded (refused or interrupted
   * it). A batch sent before the limit last halved met the overload that halved it: one cause,
   * one halving (as TCP cuts its window once per loss window), however many batches were out.
   */
  overloaded (now: number, sentAt = now): void {
    if (!this.adaptive) return
    if (!this.#halved && sentAt >= this.#halvedAt) {
      this.#halved = true
      this.#halvedAt = now
      if (this.#value > 1) {
        this.#value = Math.max(1, Math.floor(this.#value / 2))
        this.shrunk++
      }
      // the round's round trips so far were measured under the overload: they judge nothing
      this.#ms = 0
      this.#writes = 0
    }
    if (++this.#answers >= this.#value) this.#endRound(now)
  }

  #endRound (now: number): void {
    const perWrite = this.#writes > 0 ? this.#ms / this.#writes : 0
    const halved = this.#halved
    const used = this.#used
    this.#answers = 0
    this.#ms = 0
    this.#writes = 0
    this.#used = false
    this.#halved = false
    if (perWrite <= 0) return // nothing measured (overload answers only, or a clock that stood still)
    const least = this.#leastAt(perWrite, now)
    if (halved || !used) return
    const queued = this.#value * (1 - least / perWrite)
    if (queued <= GROW_AT) {
      if (this.#value < this.ceiling) {
        this.#value++
        this.grown++
      }
    } else if (queued > SHRINK_AT && this.#value > 1) {
      this.#value = Math.max(1, Math.min(this.#value - 1, Math.floor(this.#value * 0.75)))
      this.shrunk++
    }
  }

  /** Records `perWrite` in the windows of least values and returns the least of the last one to two windows. */
  #leastAt (perWrite: number, now: number): number {
    const least = this.#least.at(now)
    if (perWrite < least.current) least.current = perWrite
    return Math.min(least.current, least.previous)
  }
}
