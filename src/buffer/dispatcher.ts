import type { Clock } from '../clock.js'
import { AsyncResource } from 'node:async_hooks'
import type { WriteOp } from '../write/write-op.js'
import type { Batch, BatchLimits, TakeMoment } from './batch.js'
import type { CollectionQueue, QueueListener } from './collection-queue.js'
import { InFlightLimit } from './in-flight-limit.js'
import { OverloadPace } from './overload-pace.js'
import { OneCommand } from './one-command.js'
import { PumpSchedule } from './pump-schedule.js'
import { Ring } from './ring.js'
import { WakeTimer } from './wake-timer.js'

export interface DispatchOptions extends BatchLimits {
  /** concurrent bulkWrites across all collections: the ceiling of the adaptive limit, or the limit */
  maxInFlight: number
  /** the limit moves within [1, maxInFlight] (in-flight-limit.ts); else it is maxInFlight */
  adaptiveInFlight: boolean
  /** longest a write may wait for company; 0 = adaptive (group commit) */
  lingerMs: number
  clock: Clock
}

export interface DispatchHooks {
  /** sends one batch; the answer comes back through `Dispatcher.returned` */
  send: (batch: Batch<CollectionQueue>) => void
  /** a write found past its deadline while building a batch */
  timedOut: (op: WriteOp) => void
  /** a bug while building a batch (never expected; the buffer tries again on the next event) */
  internalError: (err: unknown) => void
  /** whether a flush() or close() still waits: then nothing lingers, not even writes queued later */
  flushAwaited: () => boolean
  /** the server's own bound on writes per command (hello's maxWriteBatchSize), once known */
  serverMaxCount?: () => number | undefined
  /** the most bytes a batch may hold so it can go as one write command, where only those may go (wire.ts) */
  commandMaxBytes?: () => number | undefined
}

/**
 * When a collection's writes may go without anything being *due*: the dispatch policy, chosen
 * once from `lingerMs` (as DataLoader's batchScheduleFn), never branched on per event.
 */
interface Policy {
  /** writes were queued in `queue` (not full, nothing flushing) */
  queued: (queue: CollectionQueue) => void
  /** a batch of `queue` returned */
  returned: (queue: CollectionQueue) => void
  /** whether `queue` (not full) may send now */
  mayGo: (queue: CollectionQueue) => boolean
  /** fresh inserts that go beside the batch out; twice as many go as halves (Infinity: never) */
  pipelineAt: number
}

/** Group commit's pipelining size: this many fresh inserts pay for their command, so they go beside the batch ahead, and twice as many as halves (ARCHITECTURE.md). */
const PIPELINE_AT = 500
/** Fewer writes gathered behind a returning batch wait a turn more for company: below this many the driver's fixed CPU per command outweighs theirs (bench/README.md, *Measured costs behind constants*). */
const COMPANY = 64

/**
 * The one place that decides when to send.
 *
 * Adaptive (`lingerMs: 0`, the default) is group commit, as databases and Nagle's algorithm
 * do it: send at once when it helps, gather while it cannot.
 * - A collection with no batch in flight sends its queued writes at the end of the event-loop
 *   turn in which they were queued: a `setImmediate`, which runs after the I/O callbacks of
 *   this turn and their microtasks, so the writes of every request handled in this turn share
 *   one batch, and a lone write waits for no timer at all (a timer, even of 0 ms, made the
 *   buffer slower than no buffer at low load: 0.14x its throughput at one connection with a
 *   5 ms timer).
 * - While a collection has a batch out, its new writes gather, and go as one batch at the end
 *   of the turn in which it returns — of the next if fewer than COMPANY gathered, nothing else
 *   waits for a slot and nothing pumps in that turn (a write queued to it, say). Not in a
 *   microtask: the driver's send, a chain of them, reached the socket 0.6 ms after its call,
 *   behind the callers' responses; at the turn's end those are out, and the requests read
 *   meanwhile join (at 100 connections 48-49 writes per batch, not 45-46: +9-16% requests
 *   served; with the next turn's, 62-66: +9-20% more). Batches grow with the load.
 * - A full batch (`maxBatchSize` / `maxBatchBytes`) goes at once whenever a slot is free, and so
 *   do PIPELINE_AT fresh inserts; a take of ≥ twice that (< twice maxCount) with 2 slots free halves.
 *
 * Lingering (`lingerMs > 0`): the first write queued while nothing is due sets the wake-up
 * lingerMs ahead; when it comes, a batch is full or a batch returns, everything queued goes.
 * So lingerMs bounds the wait of a write that finds the buffer idle (bigger batches at low load).
 *
 * Either way the in-flight limit bounds the bulkWrites on the wire (at most `maxInFlight`; it
 * moves with the round trips per write and the server's overload answers: in-flight-limit.ts), and "due" (a retry whose backoff
 * ended, the wake-up) sends every queue now, as far as slots and held targets allow; what is
 * left waits for whatever holds it (a batch's return, a backoff, a linger, the overload pace)
 * to pump again. While the server says it is overloaded (adaptive only), no batch goes before
 * the pace allows (overload-pace.ts: asked before each take, told each batch sent).
 * "Flushing" (flush(), close(), a cache miss that must see queued writes) is due that lasts
 * while a flush waits, so a write that only gets room later does not linger. One timer wakes
 * the pump: at the earliest of the policy's linger, the end of a per-write linger (queues
 * report theirs: `lingerEnd`) and the end of a hold of the pace. Which writes go together is the queue's business
 * (CollectionQueue.take); only when is decided here.
 *
 * Cost: a pump visits `#ready` or, when due, `#active` — never every collection (ARCHITECTURE.md).
 */
export class Dispatcher implements QueueListener {
  readonly #queues: CollectionQueue[] = []
  /** queues holding writes, in round-robin order: what a due pump visits */
  readonly #active = new Ring<CollectionQueue>()
  /** queues that may send without being due: what any pump visits */
  readonly #ready = new Ring<CollectionQueue>()
  /** queues some of whose writes linger: where the wake-up looks for linger ends */
  readonly #lingering = new Set<CollectionQueue>()
  readonly #policy: Policy
  #inFlight = 0
  /** how many bulkWrites may be on the wire now */
  readonly #limit: InFlightLimit
  /** while the server says it is overloaded, how fast batches may go (adaptive only; overload-pace.ts) */
  readonly #pace: OverloadPace | null
  /** clock time the pace held this pump's sends back until; 0 = it did not */
  #pacedUntil = 0
  #due = false
  /** flushAll() was called (flush, close, a cache read): due, lingering writes included, until nothing is queued */
  #kicked = false
  /** clock time when the policy's linger (lingerMs) ends; 0 = none */
  #lingerMsAt = 0
  /** what a take may hold: one batch, one command */
  readonly #bounds: OneCommand
  /** bulkWrites sent (stats) */
  sent = 0
  /** the moment of the current pump, handed to each take (one object, refilled per pump) */
  readonly #at: TakeMoment = { now: 0, flushing: false }
  /** writes found past their deadline by the current pump's takes (replaced only when used) */
  #expired: WriteOp[] = []
  /** the next pump: a microtask or the end of this event-loop turn (bound to the buffer's async context) */
  readonly #next = new PumpSchedule(() => { this.#safePump() })

  /** the one wake-up timer (bound likewise): at the earliest of the policy's linger, a per-write linger end and the end of a hold of the overload pace */
  readonly #wake: WakeTimer

  constructor (readonly options: DispatchOptions, readonly hooks: DispatchHooks) {
    this.#wake = new WakeTimer(AsyncResource.bind((): void => {
      this.#lingerMsAt = 0
      this.#due = true
      this.#next.soon()
    }), options.clock)
    this.#bounds = new OneCommand(options, hooks.serverMaxCount, hooks.commandMaxBytes)
    this.#limit = new InFlightLimit(options.maxInFlight, options.adaptiveInFlight)
    this.#pace = options.adaptiveInFlight ? new OverloadPace() : null
    this.#policy = options.lingerMs === 0 ? this.#groupCommit() : this.#lingerFor(options.lingerMs)
  }

  get inFlight (): number { return this.#inFlight }
  /** bulkWrites that may be on the wire now (stats) */
  get inFlightLimit (): number { return this.#limit.value }

  /** writes per ms the overload pace allows; 0 = no pace (stats) */
  get pace (): number { return this.#pace?.rate ?? 0 }

  /** A batch of `writes` was acknowledged `ms` after it was sent (`now`: clock time), before it returns. */
  roundTrip (ms: number, writes: number, now: number): void {
    this.#limit.sample(ms, writes, this.#inFlight, now)
    this.#pace?.acknowledged(now, writes)
  }

  /** The server answered a batch of `writes` writes sent at `sentAt` that it is overloaded (before the batch returns). */
  overloaded (now: number, sentAt: number, writes: number): void {
    this.#limit.overloaded(now, sentAt)
    this.#pace?.overloaded(now, writes, sentAt, Math.random())
  }

  get queues (): readonly CollectionQueue[] { return this.#queues }

  add (queue: CollectionQueue): void { this.#queues.push(queue) }

  /** QueueListener: writes were added to `queue`. */
  queued (queue: CollectionQueue): void {
    this.#active.add(queue.activeLink)
    if (this.full(queue)) {
      this.#ready.add(queue.readyLink)
      this.#next.soon()
    } else if (this.#flushing()) {
      this.sendNow()
    } else {
      this.#policy.queued(queue)
    }
    // a write joined a lingering one and brought its end forward (its own deadline)
    if (queue.lingerEnd !== 0) {
      this.#lingering.add(queue)
      this.#wake.by(queue.lingerEnd)
    }
  }

  /** Send everything queued, lingering writes too, as soon as slots allow (flush, close, a read that must see them). */
  flushAll (): void {
    this.#kicked = true
    this.sendNow()
  }

  /** Send everything queued as soon as slots allow (a retry's wait ended, the wake-up). */
  sendNow (): void {
    this.#lingerMsAt = 0 // consumed: the next write queued while nothing is due sets it anew
    this.#due = true
    this.#next.soon()
  }

  /** QueueListener: a batch of `queue` returned: its slot is free, and what gathered meanwhile may go. */
  returned (queue: CollectionQueue): void {
    this.#inFlight--
    this.#policy.returned(queue)
  }

  stop (): void {
    this.#wake.set(0)
    this.#lingerMsAt = 0
  }

  /** Group commit: a collection with nothing in flight sends at the end of the turn; a returning batch (or PIPELINE_AT fresh inserts) lets what gathered go. */
  #groupCommit (): Policy {
    const mayGo = (queue: CollectionQueue): boolean => queue.inFlight === 0 || (queue.allFresh && queue.size >= PIPELINE_AT)
    return {
      queued: queue => {
        if (!mayGo(queue)) return // it gathers behind the batch out
        this.#ready.add(queue.readyLink)
        if (queue.inFlight === 0) this.#next.atTurnEnd()
        else this.#next.soon() // enough fresh inserts to go beside the batch out
      },
      returned: queue => {
        if (queue.size > 0) this.#ready.add(queue.readyLink)
        // not a microtask; a few writes wait a turn more for company, unless anything else may go (header)
        const few = queue.size > 0 && queue.size < COMPANY && !this.full(queue) && !this.#flushing() && !this.#due && this.#ready.size === 1
        if (few) this.#next.atNextTurnEnd()
        else this.#next.atTurnEnd()
      },
      mayGo,
      pipelineAt: PIPELINE_AT,
    }
  }

  /** Lingering: the first write queued while nothing is due wakes the pump lingerMs later; a returning batch ends the wait of all. */
  #lingerFor (lingerMs: number): Policy {
    return {
      queued: () => {
        // (due: a pump is already scheduled, and it takes this write too)
        if (this.#due || this.#lingerMsAt !== 0) return
        this.#lingerMsAt = this.options.clock.now() + lingerMs
        this.#wake.by(this.#lingerMsAt)
      },
      returned: () => {
        this.#due = true
        this.#next.soon()
      },
      mayGo: () => false,
      pipelineAt: Infinity,
    }
  }

  /** Lingering writes go at once: while a flush() or close() waits, or until a kick is served. */
  #flushing (): boolean { return this.#kicked || this.hooks.flushAwaited() }

  /** Whether `queue` holds a full batch's worth (count or bytes, within the server's and the command's bounds): the one rule of "full". */
  full (queue: CollectionQueue): boolean {
    const limits = this.#bounds.limits
    return queue.size >= limits.maxCount || queue.bytes >= limits.maxBytes
  }

  /**
   * Whether `queue` holds more than the server takes from it now: a full batch's worth, or any
   * write while the overload pace is on (the server refuses what goes faster: what is
   * acknowledged per second is what it accepts, not what arrives). What the service rate is
   * measured over.
   */
  backlogged (queue: CollectionQueue): boolean {
    return this.full(queue) || (queue.size > 0 && (this.#pace?.rate ?? 0) > 0)
  }

  /** `limits`, or half of ≥ twice the pipelining size when two slots are free (a copy, per batch). */
  #takeLimits (queue: CollectionQueue, limits: BatchLimits): BatchLimits {
    const n = queue.size
    if (n < 2 * this.#policy.pipelineAt || n >= 2 * limits.maxCount || !queue.allFresh) return limits
    return this.#limit.value - this.#inFlight >= 2 ? { ...limits, maxCount: Math.ceil(n / 2) } : limits
  }

  /** Whether `queue` may send now without being due. */
  #mayGo (queue: CollectionQueue): boolean { return this.full(queue) || this.#policy.mayGo(queue) }

  #safePump (): void {
    try {
      this.#pump()
    } catch (bug) {
      // a throw here must neither crash the process from a microtask nor stall the buffer
      this.hooks.internalError(bug)
      this.#next.atTurnEnd()
      this.#due = true
    }
  }

  #pump (): void {
    const maxInFlight = this.#limit.value
    const limits = this.#bounds.current()
    const expired = this.#expired
    const flushing = this.#flushing()
    const at = this.#at
    at.now = this.options.clock.now()
    at.flushing = flushing
    // due is consumed here: a batch returning meanwhile (or a backoff ending) sets it anew
    const due = this.#due || flushing
    this.#due = false
    if (due) this.#lingerMsAt = 0
    const visit = due ? this.#active : this.#ready
    // each queue in `visit` once (once more per batch it sends: slots bound that); round robin
    let visits = visit.size
    this.#pacedUntil = 0
    while (visits-- > 0 && this.#inFlight < maxInFlight && !this.#heldByPace(at.now)) {
      const queue = visit.shift()
      if (queue === undefined) break
      const batch = queue.size > 0 && (due || this.#mayGo(queue)) ? queue.take(this.#takeLimits(queue, limits), at, expired) : null
      if (batch !== null) {
        this.#inFlight++
        this.sent++
        this.#pace?.sent(at.now, batch.size)
        this.hooks.send(batch)
        visits++
      } else {
        this.#ready.delete(queue.readyLink) // nothing could go: it waits for what holds it
      }
      if (queue.size === 0) {
        this.#active.delete(queue.activeLink)
        this.#ready.delete(queue.readyLink)
        continue
      }
      if (due || batch !== null) this.#active.toBack(queue.activeLink)
      if (batch !== null && this.#mayGo(queue)) this.#ready.add(queue.readyLink) // it may still go (full, or pipelines)
      if (queue.lingerEnd !== 0) this.#lingering.add(queue)
    }
    // what is left waits for what holds it (a return, a backoff, the wake-up); only a slot shortage or the pace stays due
    const left = this.#active.size > 0
    if (left && due && (this.#inFlight >= maxInFlight || this.#pacedUntil !== 0)) this.#due = true
    if (!left) this.#kicked = false
    this.#rearm()
    if (expired.length > 0) {
      this.#expired = []
      for (const op of expired) this.hooks.timedOut(op)
    }
  }

  /**
   * Whether the overload pace holds every send back at `now`: the next batch that goes is then
   * one the pace let go (a probe), and the wake-up comes when the pace allows one.
   */
  #heldByPace (now: number): boolean {
    const until = this.#pace?.nextAt ?? 0
    if (until <= now) return false
    this.#pace?.waited()
    this.#pacedUntil = Math.ceil(until) // a timer may fire a fraction of a ms early: not before the gate
    return true
  }

  /** The wake-up, at the earliest of the policy's linger, the linger end of a write left queued and the end of a pace that held writes back; none when nothing waits. */
  #rearm (): void {
    let end = this.#lingerMsAt
    if (this.#pacedUntil !== 0 && this.#active.size > 0 && (end === 0 || this.#pacedUntil < end)) end = this.#pacedUntil
    if (this.#lingering.size > 0) {
      for (const queue of this.#lingering) {
        const e = queue.size > 0 ? queue.lingerEnd : 0
        if (e === 0) this.#lingering.delete(queue)
        else if (end === 0 || e < end) end = e
      }
    }
    // nothing lingers any more (sent, flushed): a ref'd timer must not keep the process alive
    if (end !== this.#wake.at) this.#wake.set(end)
  }
}
