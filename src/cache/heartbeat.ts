/**
 * The cache bus's liveness check, end to end: every `intervalMs` the instance publishes a tiny
 * message on a channel of its own (on the publisher connection) and expects it back on its
 * subscriber connection. When none has come back for `deadlineMs` (2 intervals) the bus is
 * stale — a frozen Redis, a stalled subscriber, a partition that never closes the socket all
 * look the same — and the cache applies its offline rule until one comes back.
 *
 * The interval follows `offlineTtlMs`: offlineTtlMs / 5, within 50…100 ms. A freeze is noticed
 * within deadline + interval = 3 intervals (150 ms with offlineTtlMs 0, 300 ms from
 * offlineTtlMs 500 on), plus any time the event loop was blocked. A tick that runs late (the
 * event loop was blocked: replies may be waiting in the socket) gives no verdict. Cost: one
 * publish and one delivery of a few bytes per interval per instance (10–20 messages a second),
 * on a channel no other instance listens to.
 */
export class Heartbeat {
  readonly intervalMs: number
  readonly deadlineMs: number
  #timer: NodeJS.Timeout | undefined
  /** performance.now() of the last beat received (or of arming) */
  #lastBeat = 0
  /** when the next tick is due */
  #due = 0
  #armed = false
  #stale = false
  sent = 0
  received = 0

  constructor (offlineTtlMs: number, readonly on: { send: () => void, stale: () => void, fresh: () => void }) {
    this.intervalMs = Math.min(100, Math.max(50, Math.round(offlineTtlMs / 5)))
    this.deadlineMs = 2 * this.intervalMs
  }

  /** Worst time from a freeze to the bus counted stale (with an event loop that is not blocked). */
  get detectionMs (): number { return this.deadlineMs + this.intervalMs }

  get stale (): boolean { return this.#stale }

  start (): void {
    if (this.#timer !== undefined) return
    this.#due = performance.now() + this.intervalMs
    this.#timer = setInterval(() => { this.#tick() }, this.intervalMs)
    this.#timer.unref()
  }

  stop (): void {
    clearInterval(this.#timer)
    this.#timer = undefined
    this.#armed = false
  }

  /** The subscription is confirmed: beats are expected from now. */
  arm (): void {
    this.#armed = true
    this.#stale = false
    this.#lastBeat = performance.now()
  }

  /** The subscription is lost: the bus is offline anyway, no verdict until it is back. */
  disarm (): void {
    this.#armed = false
    this.#stale = false
  }

  /** One of our beats came back. */
  beat (): void {
    this.received++
    this.#lastBeat = performance.now()
    if (this.#stale && this.#armed) {
      this.#stale = false
      this.on.fresh()
    }
  }

  #tick (): void {
    const now = performance.now()
    const late = now - this.#due > this.intervalMs
    this.#due = now + this.intervalMs
    this.sent++
    this.on.send()
    if (this.#armed && !this.#stale && !late && now - this.#lastBeat > this.deadlineMs) {
      this.#stale = true
      this.on.stale()
    }
  }
}
