import type { WriteOp } from '../write/write-op.js'
import type { Batch } from './batch.js'
import type { BatchLimits, CollectionQueue, QueueListener } from './collection-queue.js'

export interface DispatchOptions extends BatchLimits {
  /** concurrent bulkWrites across all collections */
  maxInFlight: number
  /** longest a write waits for company */
  flushIntervalMs: number
}

export interface DispatchHooks {
  /** sends one batch; the answer comes back through `Dispatcher.returned` */
  send: (batch: Batch) => void
  /** a write found past its deadline while building a batch */
  timedOut: (op: WriteOp) => void
  /** a bug while building a batch (never expected; the buffer retries at the next interval) */
  internalError: (err: unknown) => void
}

/**
 * The one place that decides when to send.
 *
 * A write entering an empty buffer arms the one flush timer (`flushIntervalMs`: the longest
 * it waits for company). A collection reaching `maxBatchSize`/`maxBatchBytes`, the timer,
 * `flush()`, `close()`, a returning batch or a read that must see queued writes make the
 * buffer "due". While due, every free in-flight slot takes the next batch at once — so
 * under load batches grow with the arrival rate instead of waiting for the timer — and
 * `due` ends only when the queues have nothing more to give. The pump runs as a microtask:
 * writes made in one synchronous burst share a batch, and nothing waits a timer turn.
 */
export class Dispatcher implements QueueListener {
  readonly #queues: CollectionQueue[] = []
  #nextQueue = 0
  #inFlight = 0
  #due = false
  #pumpScheduled = false
  #timer: NodeJS.Timeout | null = null
  #timerArmed = false
  /** bulkWrites sent (stats) */
  sent = 0
  readonly #pumpTask = (): void => {
    this.#pumpScheduled = false
    try {
      this.#pump()
    } catch (bug) {
      // a throw here must neither crash the process from a microtask nor stall the buffer
      this.hooks.internalError(bug)
      this.#timerArmed = false
      this.#armTimer()
    }
  }

  constructor (readonly options: DispatchOptions, readonly hooks: DispatchHooks) {}

  get inFlight (): number { return this.#inFlight }
  get queues (): readonly CollectionQueue[] { return this.#queues }

  add (queue: CollectionQueue): void {
    this.#queues.push(queue)
  }

  /** QueueListener: writes were added to `queue`. */
  queued (queue: CollectionQueue): void {
    if (queue.size >= this.options.maxCount || queue.bytes >= this.options.maxBytes) {
      this.#due = true
      this.#schedulePump()
    } else if (!this.#due && !this.#timerArmed) {
      this.#armTimer()
    }
  }

  /** Send everything queued as soon as slots allow (flush, close, retries, cache misses). */
  sendNow (): void {
    if (this.#timerArmed && this.#timer !== null) {
      // a cleared timer cannot be refresh()ed back to life: drop it, #armTimer makes a new one
      clearTimeout(this.#timer)
      this.#timer = null
      this.#timerArmed = false
    }
    this.#due = true
    this.#schedulePump()
  }

  /** A batch's answer was handled: its slot is free, and what gathered meanwhile may go. */
  returned (batch: Batch): void {
    batch.queue.returned(batch)
    this.#inFlight--
    this.#due = true
    this.#schedulePump()
  }

  stop (): void {
    if (this.#timer !== null) clearTimeout(this.#timer)
    this.#timer = null
    this.#timerArmed = false
  }

  #armTimer (): void {
    this.#timerArmed = true
    if (this.#timer === null) {
      this.#timer = setTimeout(() => {
        this.#timerArmed = false
        this.sendNow()
      }, this.options.flushIntervalMs)
    } else {
      this.#timer.refresh()
    }
    // Ref'd while armed: it is armed only when writes are queued, and a process that
    // awaits a queued write must not exit before the write is sent. An idle buffer has
    // no armed timer and keeps nothing alive.
  }

  #schedulePump (): void {
    if (this.#pumpScheduled) return
    this.#pumpScheduled = true
    queueMicrotask(this.#pumpTask)
  }

  #pump (): void {
    const { maxInFlight } = this.options
    const expired: WriteOp[] = []
    const now = Date.now()
    while (this.#due && this.#inFlight < maxInFlight) {
      let sent = false
      let queued = 0
      const n = this.#queues.length
      for (let i = 0; i < n && this.#inFlight < maxInFlight; i++) {
        const queue = this.#queues[(this.#nextQueue + i) % n] as CollectionQueue
        if (queue.size === 0) continue
        const batch = queue.take(this.options, now, expired)
        queued += queue.size
        if (batch !== null) {
          this.#inFlight++
          this.sent++
          this.hooks.send(batch)
          sent = true
        }
      }
      this.#nextQueue++
      if (queued === 0 && !sent) {
        this.#due = false
        break
      }
      if (!sent) break // what is left waits behind writes of the same targets that are out
    }
    for (const op of expired) this.hooks.timedOut(op)
  }
}
