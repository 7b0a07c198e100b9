import { realClock, sleepUntil, type Clock, type ClockTimer } from '../clock.js'
import { IN_FLIGHT, type WriteOp } from '../write/write-op.js'
import type { Batch } from './batch.js'
import type { CollectionQueue } from './collection-queue.js'

/**
 * Added to maxTimeMS to bound when an ambiguous attempt can still apply: covers the time
 * between the server starting the command and our seeing the failure, and clock skew.
 */
export const FENCE_MARGIN_MS = 1000

export interface BackoffPolicy { baseDelayMs: number, maxDelayMs: number }

/**
 * A fence: held from an ambiguous failure at `since` until `since + windowMs` (maxTimeMS +
 * margin) and, when `proof` is given, until `windowMs` after the server answered a command
 * sent after the failure (mongo/liveness.ts: a paused server may not have read the attempt yet).
 */
export interface Fence { until: number, proof: Promise<number> | undefined, windowMs: number }

/**
 * Resolves once an attempt that failed ambiguously at `since` can no longer apply: `windowMs`
 * after it, and after the server's first answer since — a fence waited in place, by a batch
 * that stays in flight meanwhile (Sender#isolateClosed). The timer is ref'd, as a backoff's:
 * writes wait behind it; once the buffer is closed the proof comes at once (ServerLiveness#stop).
 */
export async function waitOut (clock: Clock, since: number, windowMs: number, liveness: { replyAfter: (since: number) => Promise<number> }): Promise<void> {
  const answeredAt = await liveness.replyAfter(since).catch(() => since)
  await sleepUntil(clock, Math.max(since, answeredAt) + windowMs)
}

/**
 * Batches that hold their targets while they wait:
 * - a batch to send again after a transient failure waits out a jittered exponential
 *   backoff, and never less than its fence (below); then its writes go back to the head of
 *   their queue and `ready` is called;
 * - a fence: after an ambiguous failure (the server may still be executing the attempt),
 *   the targets of writes already settled as `unknown` stay held until the attempt can no
 *   longer apply, so no later write to those documents can be overtaken by it: maxTimeMS +
 *   margin after the failure, and after the server's first answer since (see Fence).
 * While a batch waits, a later write to one of its targets waits behind it.
 */
export class Retries {
  /** batches out between a failure and their resend: backing off, or fenced until the attempt can no longer apply */
  readonly #backingOff = new Set<Batch<CollectionQueue>>()
  /** batches scheduled to be sent again (stats) */
  scheduled = 0
  /** the buffer is closed: nothing can queue behind a wait any more, so none keeps the process alive */
  #stopped = false
  /** the batches held by a fence: of writes told `unknown`, or retried after an ambiguous failure (a subset of #backingOff) */
  readonly #fences = new Set<Batch<CollectionQueue>>()
  /** a fence started (`true`) or ended: the read cache keeps no answer meanwhile (cache/fences.ts) */
  onFence: ((batch: Batch<CollectionQueue>, started: boolean) => void) | undefined
  /** per batch waiting for its fence's proof: the timer that tells its writes their deadline passed (#watchDeadlines) */
  readonly #deadlineTimers = new Map<Batch<CollectionQueue>, ClockTimer>()
  /** batches waiting out a fence in flight, not held here (Sender#isolateClosed): their deadlines are watched all the same */
  readonly #inPlace = new Set<Batch<CollectionQueue>>()

  constructor (
    readonly policy: BackoffPolicy,
    readonly ready: () => void,
    /** a write of a waiting batch passed its deadline (told WRITE_BUFFER_TIMEOUT; its target stays held) */
    readonly timedOut: (op: WriteOp) => void = () => {},
    readonly clock: Clock = realClock
  ) {}

  /** Sends `batch` again after its backoff, and not before its fence ends (if any). */
  schedule (batch: Batch<CollectionQueue>, fence?: Fence): void {
    const { baseDelayMs, maxDelayMs } = this.policy
    const cap = Math.min(maxDelayMs, baseDelayMs * 2 ** (batch.attempt - 1))
    const backoff = cap / 2 + Math.random() * cap / 2 // jitter: no thundering herd on recovery
    this.scheduled++
    if (fence !== undefined) this.#fenced(batch) // its first attempt may still land, even if a write of it times out meanwhile
    this.#hold(batch, Math.max(this.clock.now() + backoff, fence?.until ?? 0), fence)
  }

  /** Holds the targets of `batch` (settled writes) until its fence ends. */
  fence (batch: Batch<CollectionQueue>, fence: Fence): void {
    // ref'd, like a backoff: a later write queued behind the fence has nothing else to wake
    // it, and a process that exits meanwhile strands it (at most the fence)
    this.#fenced(batch)
    this.#hold(batch, fence.until, fence)
  }

  #fenced (batch: Batch<CollectionQueue>): void {
    this.#fences.add(batch)
    this.onFence?.(batch, true)
  }

  #fenceEnded (batch: Batch<CollectionQueue>): void {
    if (this.#fences.delete(batch)) this.onFence?.(batch, false)
  }

  #hold (batch: Batch<CollectionQueue>, until: number, fence: Fence | undefined): void {
    batch.queue.startBackoff(batch)
    this.#backingOff.add(batch)
    if (fence?.proof === undefined) {
      this.#arm(batch, until)
      return
    }
    const windowMs = fence.windowMs
    // How long the proof takes is not bounded (a server down stays silent): a write waiting
    // to be retried must still be told its deadline passed, on time. Its target stays held.
    this.#watchDeadlines(batch)
    fence.proof.then(answeredAt => {
      // close() may have taken the batch back meanwhile
      if (this.#backingOff.has(batch) && batch.retryTimer === null) this.#arm(batch, Math.max(until, answeredAt + windowMs))
    }, () => {
      if (this.#backingOff.has(batch) && batch.retryTimer === null) this.#arm(batch, until)
    })
  }

  #watchDeadlines (batch: Batch<CollectionQueue>): void {
    this.#unwatch(batch)
    let earliest = 0
    for (const op of batch.ops) {
      if (op.state === IN_FLIGHT && op.deadline > 0 && (earliest === 0 || op.deadline < earliest)) earliest = op.deadline
    }
    if (earliest === 0) return
    const timer = this.clock.setTimeout(() => {
      this.#deadlineTimers.delete(batch)
      const waiting = this.#inPlace.has(batch) || (this.#backingOff.has(batch) && batch.retryTimer === null)
      if (!waiting) return // released, or its wait is timed now
      const now = this.clock.now()
      for (const op of batch.ops) if (op.state === IN_FLIGHT && op.deadline > 0 && op.deadline <= now) this.timedOut(op)
      this.#watchDeadlines(batch)
    }, Math.max(0, earliest - this.clock.now()))
    if (this.#stopped) timer.unref()
    this.#deadlineTimers.set(batch, timer)
  }

  /** Tells the writes of `batch`, in flight and waiting in place, when their deadline passes (until unwatch()). */
  watchDeadlines (batch: Batch<CollectionQueue>): void {
    this.#inPlace.add(batch)
    this.#watchDeadlines(batch)
  }

  /** The wait in place is over. */
  unwatch (batch: Batch<CollectionQueue>): void {
    this.#inPlace.delete(batch)
    this.#unwatch(batch)
  }

  /** Its wait is timed now, or over: nothing to watch. */
  #unwatch (batch: Batch<CollectionQueue>): void {
    const timer = this.#deadlineTimers.get(batch)
    if (timer === undefined) return
    this.clock.clearTimeout(timer)
    this.#deadlineTimers.delete(batch)
  }

  #arm (batch: Batch<CollectionQueue>, until: number): void {
    this.#unwatch(batch)
    batch.retryTimer = this.clock.setTimeout(() => {
      this.#backingOff.delete(batch)
      batch.retryTimer = null
      batch.queue.endBackoff(batch) // puts back only the writes still to be sent
      this.#fenceEnded(batch)
      this.ready()
    }, Math.max(0, until - this.clock.now()))
    if (this.#stopped) batch.retryTimer.unref()
  }

  /** close() is done: the fences left (and any made later) no longer keep the process alive. */
  stop (): void {
    this.#stopped = true
    for (const batch of this.#backingOff) batch.retryTimer?.unref()
    for (const timer of this.#deadlineTimers.values()) timer.unref()
  }

  /** Stops every wait and hands back the batches that were waiting (close). */
  removeAll (): Batch<CollectionQueue>[] {
    const batches = [...this.#backingOff]
    for (const batch of batches) {
      if (batch.retryTimer !== null) this.clock.clearTimeout(batch.retryTimer)
      batch.retryTimer = null
      this.#unwatch(batch)
      batch.queue.abandonBackoff(batch)
      this.#fenceEnded(batch)
    }
    this.#backingOff.clear()
    return batches
  }
}
