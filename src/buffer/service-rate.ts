/**
 * Shedding at the door: whether a write with a deadline would still be queued when it passes,
 * at the rate the server serves the buffer now. Pure: told each acknowledged batch and the time (`now`, ms,
 * from its caller's clock), it reads no clock. Measured per batch, never per write.
 *
 * Conservative, so that a write is refused only when it would surely have expired queued:
 * - the rate is measured only while the buffer is *backlogged*: each batch acknowledged in the
 *   stretch left at least a full batch queued behind it, or writes the overload pace held back
 *   (Dispatcher#backlogged), or writes waiting for room. Below
 *   that, the writes acknowledged per second are the arrivals, not what the server can take
 *   (group commit grows batches with the load): a burst after a quiet minute must not be judged
 *   by the quiet minute. Any batch acknowledged with less behind it ends the stretch;
 * - nothing is refused before the stretch lasted MIN_SPAN_MS, nor once no batch was
 *   acknowledged for STALE_MS (a stall, a fence: the deadlines tell those writes, not a guess);
 * - a write is refused only when the writes ahead of it would take longer than its time left
 *   at that rate (SLACK); a write without a deadline never is.
 * SLACK was 2 at first: the queue then held two deadlines' worth of writes under an overload,
 * half of which waited their whole deadline to be told not-sent, and the writes after the
 * overload waited behind them (bench overload (b): back to full speed 1.0-1.1 s after it, with
 * a deadline of 400 ms; with 1: 0.8-0.9 s, goodput unchanged, as the queue still holds a whole
 * deadline's worth of work for the server).
 */

/** The backlogged stretch a rate is measured over before it may refuse anything. */
export const MIN_SPAN_MS = 1_000
/** No batch acknowledged for this long: the rate is too old to refuse anything on. */
export const STALE_MS = 2_000
/** Writes ahead must need more than this many times the write's time left at the measured rate. */
export const SLACK = 1
/** The rate is over the current bucket and the previous one (one to two buckets of this length). */
const BUCKET_MS = 1_000

export class ServiceRate {
  /** start of the backlogged stretch; -1: not backlogged */
  #since = -1
  /** the last acknowledgment counted */
  #lastAt = 0
  /** writes acknowledged in the current bucket and the previous one, and when the previous one started */
  #current = 0
  #currentStart = 0
  #previous = 0
  #previousStart = -1

  /** Whether a rate may refuse anything now (one field read: what a write with a deadline asks first). */
  get measured (): boolean { return this.#since !== -1 && this.#lastAt - this.#since >= MIN_SPAN_MS }

  /** A batch of `writes` writes was acknowledged; `backlogged`: a full batch (or waiters for room) was left behind it. */
  acknowledged (writes: number, backlogged: boolean, now: number): void {
    if (!backlogged) {
      this.#since = -1
      return
    }
    if (this.#since === -1 || now - this.#lastAt >= STALE_MS) {
      // a new stretch: what this batch carried was queued before it, and counts for nothing
      this.#since = now
      this.#lastAt = now
      this.#current = 0
      this.#currentStart = now
      this.#previous = 0
      this.#previousStart = -1
      return
    }
    if (now - this.#currentStart >= BUCKET_MS) {
      this.#previous = this.#current
      this.#previousStart = this.#currentStart
      this.#current = 0
      this.#currentStart = now
    }
    this.#current += writes
    this.#lastAt = now
  }

  /** Writes acknowledged per ms over the last one to two buckets of the stretch, up to its last acknowledgment; 0: none to go by. */
  perMs (now: number): number {
    if (!this.measured || now - this.#lastAt >= STALE_MS) return 0
    const start = this.#previousStart === -1 ? this.#currentStart : this.#previousStart
    const span = this.#lastAt - start
    return span > 0 ? (this.#previous + this.#current) / span : 0
  }

  /** Whether a write with `remainingMs` left and `ahead` writes queued before it would surely expire queued. */
  refuses (remainingMs: number, ahead: number, now: number): boolean {
    if (remainingMs <= 0 || ahead <= 0) return false
    const rate = this.perMs(now)
    return rate > 0 && ahead > rate * remainingMs * SLACK
  }
}
