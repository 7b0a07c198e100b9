import type { Clock, ClockTimer } from '../../src/clock.js'

interface FakeTimer extends ClockTimer { at: number, seq: number, task: () => void, done: boolean }

/**
 * A Clock (src/clock.ts) that moves only when told: `advance(ms)` runs every timer due by then,
 * in the order they are due (set order on a tie), each at its own time (`now()` reads it while
 * it runs), timers set meanwhile included. Nothing global is faked: only the code given this
 * clock sees it.
 */
export class FakeClock implements Clock {
  #now: number
  #seq = 0
  #timers: FakeTimer[] = []

  constructor (start = 1_000_000) { this.#now = start }

  now = (): number => this.#now

  setTimeout = (task: () => void, ms: number): ClockTimer => {
    const timer: FakeTimer = { at: this.#now + Math.max(0, ms), seq: this.#seq++, task, done: false, unref: () => timer }
    this.#timers.push(timer)
    return timer
  }

  clearTimeout = (timer: ClockTimer): void => {
    (timer as FakeTimer).done = true
  }

  /** Timers armed and not yet run. */
  get pending (): number { return this.#timers.filter(t => !t.done).length }

  /** Moves time `ms` forward, running each timer due on the way at its time. */
  advance (ms: number): void {
    const end = this.#now + ms
    for (;;) {
      let next: FakeTimer | undefined
      for (const t of this.#timers) {
        if (!t.done && t.at <= end && (next === undefined || t.at < next.at || (t.at === next.at && t.seq < next.seq))) next = t
      }
      if (next === undefined) break
      this.#now = Math.max(this.#now, next.at)
      next.done = true
      next.task()
    }
    this.#timers = this.#timers.filter(t => !t.done)
    this.#now = end
  }

  /** Moves time `ms` forward without running any timer: an event loop blocked that long (the next advance runs them late). */
  block (ms: number): void { this.#now += ms }

  /** `advance`, then lets promise callbacks run (for code that awaits between timers). */
  async advanceAsync (ms: number, step = 1): Promise<void> {
    const end = this.#now + ms
    while (this.#now < end) {
      this.advance(Math.min(step, end - this.#now))
      for (let i = 0; i < 10; i++) await Promise.resolve()
    }
  }
}
