import { AsyncResource } from 'node:async_hooks'

/**
 * A settled promise whose `then` queues a microtask: Node's queueMicrotask wraps every callback
 * in an AsyncResource and a bound function (~430 bytes, once per returned batch); a reaction on
 * a settled promise costs a fifth of that, in the same microtask queue. (The task is bound to
 * the buffer's context already.)
 */
const SETTLED = Promise.resolve()

/**
 * When the Dispatcher's pump runs next: `soon()` in a microtask (something is due),
 * `atTurnEnd()` in a `setImmediate` — after the I/O callbacks of this event-loop turn and their
 * microtasks, so the writes of every request handled in this turn share one batch — or
 * `atNextTurnEnd()`, a turn later (a small batch returned: its successors wait for company).
 * Each is scheduled at most once until it runs. (The other way, the wake-up at a linger's end,
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
  #nextTurn = false
  readonly #soonTask: () => void
  readonly #turnEndTask: () => void
  readonly #nextTurnTask: () => void

  constructor (pump: () => void) {
    this.#soonTask = AsyncResource.bind((): void => {
      this.#soon = false
      pump()
    })
    this.#turnEndTask = AsyncResource.bind((): void => {
      this.#turnEnd = false
      pump()
    })
    // an immediate queued while immediates run waits for the next turn's
    this.#nextTurnTask = AsyncResource.bind((): void => {
      this.#nextTurn = false
      this.atTurnEnd()
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

  /** At the end of the next event-loop turn (of the one after, if asked while immediates run); a pump asked for meanwhile runs then. */
  atNextTurnEnd (): void {
    if (this.#nextTurn) return
    this.#nextTurn = true
    setImmediate(this.#nextTurnTask)
  }
}
