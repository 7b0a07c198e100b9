import { realClock, type Clock, type ClockTimer } from '../clock.js'

/**
 * The Dispatcher's one wake-up timer: fires its task at the earliest moment asked for.
 * Ref'd while armed: it is armed only while writes are queued, and a process that awaits a
 * queued write must not exit before the write is sent. An idle buffer has none and keeps
 * nothing alive.
 */
export class WakeTimer {
  #timer: ClockTimer | null = null
  #at = 0

  /** `task` is bound by the caller to the context it must run in */
  constructor (readonly task: () => void, readonly clock: Clock = realClock) {}

  /** clock time when it fires; 0 = not armed */
  get at (): number { return this.#at }

  /** Fires no later than `at`. */
  by (at: number): void {
    if (this.#timer === null || at < this.#at) this.set(at)
  }

  /** Fires at `at` exactly; 0 disarms it. */
  set (at: number): void {
    if (this.#timer !== null) this.clock.clearTimeout(this.#timer)
    this.#timer = null
    this.#at = at
    if (at !== 0) this.#timer = this.clock.setTimeout(this.#fire, Math.max(0, at - this.clock.now()))
  }

  readonly #fire = (): void => {
    this.#timer = null
    this.#at = 0
    this.task()
  }
}
