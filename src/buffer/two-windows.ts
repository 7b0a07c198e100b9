/**
 * A sliding view of the last one to two window lengths, kept as two values: the current
 * window's and the previous one's (a latency histogram, a least round trip). Moving to a later
 * time makes the current window the previous one once it has ended, and forgets both once the
 * current one ended a whole window ago. Callers hand in the time (`now`): it reads no clock.
 */
export class TwoWindows<T> {
  current: T
  previous: T
  #start: number

  /** `empty()`: a window's value before anything is recorded in it */
  constructor (readonly ms: number, readonly empty: () => T, now: number) {
    this.current = empty()
    this.previous = empty()
    this.#start = now
  }

  /** Moves on to `now` (before recording in `current`). */
  at (now: number): this {
    const elapsed = now - this.#start
    if (elapsed >= this.ms) {
      const previousCounts = elapsed < 2 * this.ms
      this.previous = previousCounts ? this.current : this.empty()
      this.current = this.empty()
      this.#start = previousCounts ? this.#start + this.ms : now
    }
    return this
  }

  /** The windows that still count at `now`, without moving on: those within the last one to two lengths. */
  counting (now: number): T[] {
    const elapsed = now - this.#start
    return elapsed >= 2 * this.ms ? [] : elapsed >= this.ms ? [this.current] : [this.previous, this.current]
  }
}
