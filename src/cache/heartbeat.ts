import { realClock, type Clock, type ClockTimer } from '../clock.js'

/**
 * The cache bus's liveness check, end to end: every `intervalMs` the instance publishes a tiny
 * message on a channel of its own (on the publisher connection), carrying when it was sent, and
 * expects it back on its subscriber connection within `deadlineMs` (2 intervals). A beat that has
 * not come back by then makes the bus stale — a frozen Redis, a stalled subscriber, a partition
 * that never closes the socket, and also a bus that is merely slow: beats that keep coming back
 * late prove Redis alive, not that another instance's message arrives in time (docs/server-behaviours.md: a heartbeat proves the bus is alive, not that it is prompt) —
 * and the cache applies its offline rule until a beat comes back within the deadline.
 *
 * The interval follows `offlineTtlMs`: offlineTtlMs / 5, within 50…100 ms. A freeze, or a bus
 * turning slow, is noticed within deadline + interval = 3 intervals (150 ms with offlineTtlMs 0,
 * 300 ms from offlineTtlMs 500 on): the first beat sent after it is judged two ticks later, plus
 * any time the event loop was blocked. A tick that runs late (the event loop was blocked: replies
 * may be waiting in the socket) gives no verdict. Cost: one publish and one delivery of a few bytes
 * per interval per instance (10–20 messages a second), on a channel no other instance listens to.
 */
export class Heartbeat {
  readonly #clock: Clock
  readonly intervalMs: number
  readonly deadlineMs: number
  #timer: ClockTimer | undefined
  /** clock time of the beats sent at the last two ticks, the older first: the older one is judged at the next tick */
  #sentAt = [-Infinity, -Infinity]
  /** when the latest beat that came back was sent */
  #echoed = -Infinity
  /** when the subscription was confirmed: beats sent before may have reached Redis before it and never come back */
  #armedAt = Infinity
  /** when the next tick is due */
  #due = 0
  #armed = false
  #stale = false
  sent = 0
  received = 0
  /** the round trip of the latest beat back (ms) */
  echoMs: number | undefined

  /** `send(sentAt)`: publish a beat carrying `sentAt`, handed back to `beat()` when it arrives */
  constructor (offlineTtlMs: number, readonly on: { send: (sentAt: number) => void, stale: () => void, fresh: () => void }, clock: Clock = realClock) {
    this.#clock = clock
    this.intervalMs = Math.min(100, Math.max(50, Math.round(offlineTtlMs / 5)))
    this.deadlineMs = 2 * this.intervalMs
  }

  /** Worst time from a freeze to the bus counted stale (with an event loop that is not blocked). */
  get detectionMs (): number { return this.deadlineMs + this.intervalMs }

  get stale (): boolean { return this.#stale }

  start (): void {
    if (this.#timer !== undefined) return
    this.#due = this.#clock.now() + this.intervalMs
    this.#next()
  }

  /** One tick per interval, each timer set by the last (unref'd: a bus keeps no process alive). */
  #next (): void {
    this.#timer = this.#clock.setTimeout(() => {
      this.#tick()
      if (this.#timer !== undefined) this.#next()
    }, this.intervalMs)
    this.#timer.unref()
  }

  stop (): void {
    if (this.#timer !== undefined) this.#clock.clearTimeout(this.#timer)
    this.#timer = undefined
    this.#armed = false
  }

  /** The subscription is confirmed: beats are expected from now. */
  arm (): void {
    this.#armed = true
    this.#stale = false
    this.#armedAt = this.#clock.now()
  }

  /** The subscription is lost: the bus is offline anyway, no verdict until it is back. */
  disarm (): void {
    this.#armed = false
    this.#stale = false
  }

  /** One of our beats came back: the one sent at `sentAt` (by default the last one sent). Only one back within the deadline makes a stale bus fresh. */
  beat (sentAt = this.#sentAt[1] as number): void {
    this.received++
    const now = this.#clock.now()
    this.echoMs = now - sentAt
    if (sentAt > this.#echoed) this.#echoed = sentAt
    if (this.#stale && this.#armed && sentAt >= this.#armedAt && this.echoMs <= this.deadlineMs) {
      this.#stale = false
      this.on.fresh()
    }
  }

  #tick (): void {
    const now = this.#clock.now()
    const late = now - this.#due > this.intervalMs
    this.#due = now + this.intervalMs
    // sent two ticks ago (at least the deadline ago): back by now, or the bus is not prompt
    const judged = this.#sentAt[0] as number
    this.#sentAt[0] = this.#sentAt[1] as number
    this.#sentAt[1] = now
    this.sent++
    this.on.send(now)
    if (this.#armed && !this.#stale && !late && judged >= this.#armedAt && this.#echoed < judged) {
      this.#stale = true
      this.on.stale()
    }
  }
}
