import { AsyncResource } from 'node:async_hooks'

/**
 * A settled promise whose `then` queues a microtask: Node's queueMicrotask wraps every callback
 * in an AsyncResource and a bound function (~430 bytes, once per returned batch); a reaction on
 * a settled promise costs a fifth of that, in the same microtask queue. (The task is bound to
 * the buffer's context already.)
 */
const SETTLED = Promise.resolve()

/**
 * When the Dispatcher's pump runs next: `soon()` in a microtask (a batch returned, something
 * is due), `atTurnEnd()` in a `setImmediate` — after the I/O callbacks of this event-loop turn
 * and their microtasks, so the writes of every request handled in this turn share one batch.
 * Each is scheduled at most once until it runs. (The third way, the wake-up at a linger's end,
 * is the WakeTimer.)
 *
 * Bound to the async context of the buffer's construction: a send belongs to no caller.
 * Timers, immediates and microtasks otherwise carry the AsyncLocalStorage of whoever armed
 * them, and every bulkWrite, driver event and log line of a batch would be attributed to that
 * one request.
 */
export class PumpSchedule {
  #soon = false
  #turnEnd = false
  readonly #soonTask: () => void
  readonly #turnEndTask: () => void

  constructor (pump: () => void) {
    this.#soonTask = AsyncResource.bind((): void => {
      this.#soon = false
      pump()
    })
    this.#turnEndTask = AsyncResource.bind((): void => {
      this.#turnEnd = false
      pump()
    })
  }

  soon (): void {
    if (this.#soon) return
    this.#soon = true
    // eslint-disable-next-line no-void -- the task never throws (the Dispatcher's #safePump)
    void SETTLED.then(this.#soonTask)
  }

  atTurnEnd (): void {
    if (this.#turnEnd) return
    this.#turnEnd = true
    setImmediate(this.#turnEndTask)
  }
}
