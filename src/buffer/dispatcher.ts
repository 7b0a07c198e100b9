import { AsyncResource } from 'node:async_hooks'
import type { WriteOp } from '../write/write-op.js'
import type { Batch, BatchLimits, QueueListener } from './batch.js'
import type { CollectionQueue } from './collection-queue.js'
import { Ring } from './ring.js'

export interface DispatchOptions extends BatchLimits {
  /** concurrent bulkWrites across all collections */
  maxInFlight: number
  /** longest a write may wait for company; 0 = adaptive (group commit) */
  lingerMs: number
}

export interface DispatchHooks {
  /** sends one batch; the answer comes back through `Dispatcher.returned` */
  send: (batch: Batch) => void
  /** a write found past its deadline while building a batch */
  timedOut: (op: WriteOp) => void
  /** a bug while building a batch (never expected; the buffer tries again on the next event) */
  internalError: (err: unknown) => void
  /** whether a flush() or close() still waits: then nothing lingers, not even writes queued later */
  flushWaiting: () => boolean
}

/**
 * The one place that decides when to send.
 *
 * Adaptive (`lingerMs: 0`, the default) is group commit, as databases and Nagle's algorithm
 * do it: send at once when it helps, gather while it cannot.
 * - A collection with no batch in flight sends its queued writes at the end of the event-loop turn in which they were queued: a
 *   `setImmediate`, which runs after the I/O callbacks of this turn and their microtasks, so
 *   the writes of every request handled in this turn share one batch, and a lone write waits
 *   for no timer at all (a timer, even of 0 ms, made the buffer slower than no buffer at low
 *   load: 0.14x its throughput at one connection with a 5 ms timer).
 * - While a collection has a batch out, its new writes gather; the moment the batch returns
 *   they go (a microtask), as one batch, so batches grow with the load and round trips.
 * - A full batch (`maxBatchSize` / `maxBatchBytes`) goes at once whenever a slot is free.
 *
 * Lingering (`lingerMs > 0`): the first write queued arms one timer; when it fires, a batch
 * is full or a batch returns, everything queued goes. So lingerMs bounds the wait of a write
 * that finds the buffer idle; users trade that latency for bigger batches at low load.
 *
 * Either way `maxInFlight` bounds the bulkWrites on the wire, and "due" (a retry whose
 * backoff ended, the linger timer) sends every queue now, as far as slots and held targets
 * allow; what is left waits for whatever holds it (a batch's return, a backoff, a linger)
 * to pump again. "Flushing" (flush(), close(), a cache miss that must see queued writes) is
 * due that lasts while a flush waits, so a write that only gets room later does not linger.
 * Which writes go together is the queue's business (CollectionQueue.take); only when is
 * decided here.
 *
 * Cost: a pump visits the queues that may send now (`#ready`: writes queued while idle, a
 * batch returned, a full queue, a slot awaited), or, when due, the queues that hold writes
 * (`#active`) — never every collection the buffer ever saw. Round robin: a queue that sent
 * moves to the back of both.
 */
export class Dispatcher implements QueueListener {
  readonly #queues: CollectionQueue[] = []
  /** queues holding writes, in round-robin order: what a due pump visits */
  readonly #active = new Ring<CollectionQueue>()
  /** queues that may send without being due: what any pump visits */
  readonly #ready = new Ring<CollectionQueue>()
  /** queues some of whose writes linger: the linger timer's candidates */
  readonly #lingering = new Set<CollectionQueue>()
  readonly #adaptive: boolean
  #inFlight = 0
  #due = false
  /** flushAll() was called (flush, close, a cache read): due, lingering writes included, until nothing is queued */
  #kicked = false
  #pumpScheduled = false
  #lingerTimer: NodeJS.Timeout | null = null
  #lingerAt = 0
  #turnEndScheduled = false
  #timer: NodeJS.Timeout | null = null
  #timerArmed = false
  /** bulkWrites sent (stats) */
  sent = 0
  // Bound to the async context of the buffer's construction: a send belongs to no caller.
  // Timers, immediates and microtasks otherwise carry the AsyncLocalStorage of whoever armed
  // them, and every bulkWrite, driver event and log line of a batch would be attributed to
  // that one request.
  readonly #pumpTask = AsyncResource.bind((): void => {
    this.#pumpScheduled = false
    this.#safePump()
  })

  readonly #turnEndTask = AsyncResource.bind((): void => {
    this.#turnEndScheduled = false
    this.#safePump()
  })

  readonly #timerTask = AsyncResource.bind((): void => {
    this.#timerArmed = false
    this.sendNow()
  })

  readonly #lingerTask = AsyncResource.bind((): void => {
    this.#lingerTimer = null
    this.#lingerAt = 0
    this.#due = true
    this.#schedulePump()
  })

  constructor (readonly options: DispatchOptions, readonly hooks: DispatchHooks) {
    this.#adaptive = options.lingerMs === 0
  }

  get inFlight (): number { return this.#inFlight }
  get queues (): readonly CollectionQueue[] { return this.#queues }

  add (queue: CollectionQueue): void {
    this.#queues.push(queue)
  }

  /** QueueListener: writes were added to `queue`. */
  queued (queue: CollectionQueue): void {
    this.#active.add(queue)
    if (this.#full(queue)) {
      this.#ready.add(queue)
      this.#schedulePump()
    } else if (this.#flushing()) {
      this.sendNow()
    } else if (this.#adaptive) {
      if (queue.inFlight === 0) {
        this.#ready.add(queue)
        this.#scheduleTurnEnd()
      }
    } else if (!this.#due && !this.#timerArmed) {
      // (due: a pump is already scheduled, and it takes this write too)
      this.#armTimer()
    }
    // a write joined a lingering one and brought its end forward (its own deadline)
    if (queue.lingerEnd !== 0) {
      this.#lingering.add(queue)
      if (this.#lingerTimer === null || queue.lingerEnd < this.#lingerAt) this.#armLinger()
    }
  }

  /** Send everything queued, lingering writes too, as soon as slots allow (flush, close, a read that must see them). */
  flushAll (): void {
    this.#kicked = true
    this.sendNow()
  }

  /** Lingering writes go at once: while a flush() or close() waits, or until a kick is served. */
  #flushing (): boolean {
    return this.#kicked || this.hooks.flushWaiting()
  }

  /** Send everything queued as soon as slots allow (a retry's wait ended, the linger timer). */
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
    const queue = batch.queue
    queue.returned(batch)
    this.#inFlight--
    if (queue.size > 0 && this.#mayGo(queue)) this.#ready.add(queue)
    // lingering: a returning batch ends the wait of everything queued, as the timer would
    if (!this.#adaptive) this.#due = true
    this.#schedulePump()
  }

  stop (): void {
    if (this.#timer !== null) clearTimeout(this.#timer)
    this.#timer = null
    this.#timerArmed = false
    if (this.#lingerTimer !== null) clearTimeout(this.#lingerTimer)
    this.#lingerTimer = null
  }

  #full (queue: CollectionQueue): boolean {
    return queue.size >= this.options.maxCount || queue.bytes >= this.options.maxBytes
  }

  /** Whether `queue` may send now without being due. */
  #mayGo (queue: CollectionQueue): boolean {
    return this.#full(queue) || (this.#adaptive && queue.inFlight === 0)
  }

  #armTimer (): void {
    this.#timerArmed = true
    if (this.#timer === null) {
      this.#timer = setTimeout(this.#timerTask, this.options.lingerMs)
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

  #scheduleTurnEnd (): void {
    if (this.#turnEndScheduled) return
    this.#turnEndScheduled = true
    setImmediate(this.#turnEndTask)
  }

  #safePump (): void {
    try {
      this.#pump()
    } catch (bug) {
      // a throw here must neither crash the process from a microtask nor stall the buffer
      this.hooks.internalError(bug)
      if (this.#adaptive) this.#scheduleTurnEnd()
      else {
        this.#timerArmed = false
        this.#armTimer()
      }
    }
  }

  #pump (): void {
    const { maxInFlight } = this.options
    const expired: WriteOp[] = []
    const flushing = this.#flushing()
    const at = { now: Date.now(), flushing }
    // due is consumed here: a batch returning meanwhile (or a backoff ending) sets it anew
    const due = this.#due || flushing
    this.#due = false
    const visit = due ? this.#active : this.#ready
    // Each queue in `visit` is looked at once (a queue that sent, once more per batch it sends:
    // slots bound that); one that sent or still holds writes goes to the back (round robin).
    // A pump costs the queues it visits, never every collection.
    let visits = visit.size
    while (visits-- > 0 && this.#inFlight < maxInFlight) {
      const queue = visit.shift()
      if (queue === undefined) break
      const batch = queue.size > 0 && (due || this.#mayGo(queue)) ? queue.take(this.options, at, expired) : null
      if (batch !== null) {
        this.#inFlight++
        this.sent++
        this.hooks.send(batch)
        visits++
      } else {
        this.#ready.delete(queue) // nothing could go: it waits for what holds it
      }
      if (queue.size === 0) {
        this.#active.delete(queue)
        this.#ready.delete(queue)
        continue
      }
      if (due || batch !== null) {
        this.#active.delete(queue) // to the back
        this.#active.add(queue)
      }
      if (batch !== null && this.#mayGo(queue)) this.#ready.add(queue) // still full
      if (queue.lingerEnd !== 0) this.#lingering.add(queue)
    }
    // What is left waits behind writes that are out, fenced or lingering: their return, their
    // backoff's end or the linger timer pumps again. Only writes left for want of a slot stay due.
    const left = this.#active.size > 0
    if (left && due && this.#inFlight >= maxInFlight) this.#due = true
    if (!left) this.#kicked = false
    this.#armLinger()
    for (const op of expired) this.hooks.timedOut(op)
  }

  /** Wakes the pump when the earliest linger of a write left queued ends. */
  #armLinger (): void {
    let end = 0
    for (const queue of this.#lingering) {
      const e = queue.size > 0 ? queue.lingerEnd : 0
      if (e === 0) this.#lingering.delete(queue)
      else if (end === 0 || e < end) end = e
    }
    if (end === 0) {
      // nothing lingers any more (sent, flushed): a ref'd timer must not keep the process alive
      if (this.#lingerTimer !== null) clearTimeout(this.#lingerTimer)
      this.#lingerTimer = null
      this.#lingerAt = 0
      return
    }
    if (this.#lingerTimer !== null && this.#lingerAt <= end) return
    if (this.#lingerTimer !== null) clearTimeout(this.#lingerTimer)
    this.#lingerAt = end
    this.#lingerTimer = setTimeout(this.#lingerTask, Math.max(0, end - Date.now()))
  }
}
