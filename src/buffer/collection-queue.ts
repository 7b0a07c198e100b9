import type { Collection } from 'mongodb'
import { tryCoalesce } from '../write/coalesce.js'
import { COMMAND_OF, IN_FLIGHT, QUEUED, type WriteOp } from '../write/write-op.js'
import { Batch, type BatchLimits, type QueueListener, type TakeMoment } from './batch.js'
import { Lingering } from './lingering.js'
import { OpList } from './op-list.js'
import { Parked } from './parked.js'

/**
 * The queue of one collection and the rule that picks a batch from it.
 *
 * Ordering: an op is taken only if no earlier op with the same target is still queued
 * (skipped in this pass), in flight or waiting to be retried — otherwise two batches could
 * apply them in either order (two writes in one unordered bulkWrite, or in two concurrent
 * ones, have no order). Skipped ops keep their place for the next take.
 *
 * Fast path: while the queue holds only generated-_id inserts, no two of them can share a
 * target (or match anything out), so batches are taken without any per-op bookkeeping and
 * their targets are not even computed. Such batches are "fresh"; if another kind of write
 * shows up while they are out, their targets are held before it is considered.
 */
export class CollectionQueue {
  readonly #list = new OpList()
  /** live queued ops (aborted/expired ones still in `#list` are not counted) */
  #size = 0
  #bytes = 0
  #coalesced = 0
  /** batches in flight or waiting (a retry's backoff, a fence) */
  #out = 0
  /** batches in flight */
  #inFlight = 0
  /** Target → the op holding it: taken into the batch being built (still QUEUED), out, or fenced. */
  readonly #held = new Map<string, WriteOp>()
  /** later writes of a held target, parked until it is released (parked.ts) */
  readonly #parked = new Parked()
  /** inside take(): targets whose parked writes are freed once it is done (it walks the list) */
  #taking = false
  #freed: string[] | null = null
  #freshOnly = true
  readonly #freshOut = new Set<Batch>()
  /** performance.now() when the queue last became non-empty: the queue wait of a batch's oldest write */
  #nonEmptySince = 0
  /** lingering writes: later writes of their target join them as they are pushed (see push) */
  readonly #lingering = new Lingering()

  constructor (
    readonly name: string,
    readonly collection: Collection,
    readonly ordered: boolean,
    /** coalesce writes into a lingering one as they are pushed */
    readonly coalesce: boolean,
    readonly listener: QueueListener
  ) {}

  get size (): number { return this.#size }
  get bytes (): number { return this.#bytes }
  /** batches of this queue in flight or waiting (retry backoff, fence): an ordered queue waits for 0 */
  get out (): number { return this.#out }
  /** batches of this queue on the wire */
  get inFlight (): number { return this.#inFlight }
  /** writes coalesced into an earlier one (stats) */
  get coalesced (): number { return this.#coalesced }
  /** Date.now() when the earliest linger of a write left queued ends; 0 = none */
  get lingerEnd (): number { return this.#lingering.end }

  push (op: WriteOp): void {
    if ((!this.#lingering.empty || op.lingerUntil > 0) && !this.ordered && this.#lingering.join(op, this.coalesce)) {
      this.#coalesced++
      this.listener.queued(this)
      return
    }
    if (this.#size === 0) this.#nonEmptySince = performance.now()
    if (!op.fresh) this.#freshOnly = false
    this.#list.push(op)
    this.#size++
    this.#bytes += op.bytes
    this.listener.queued(this)
  }

  /** The op left the queue without being taken (aborted, expired), or was coalesced into another. */
  forget (op: WriteOp): void {
    this.#lingering.left(op)
    this.#size--
    this.#bytes -= op.bytes
    // the write parked ones wait for, leaving before it is taken, must not strand them
    if (this.#parked.leftAsHead(op)) {
      if (this.#taking) (this.#freed ??= []).push(op.target)
      else this.#freeParked([op.target])
    }
  }

  #freeParked (targets: string[]): void {
    const next: WriteOp[] = []
    for (const target of targets) if (!this.#held.has(target)) this.#parked.release(target, next)
    this.#toHead(next)
  }

  /** The next batch: ops of one write command, ≤ maxCount ops, about ≤ maxBytes; expired ops go to `expired`. */
  take (limits: BatchLimits, at: TakeMoment, expired: WriteOp[]): Batch | null {
    return this.#walking(() => this.#take(limits, at, expired))
  }

  /** Runs a walk over the list; parked writes freed meanwhile (forget()) are moved once it is done. */
  #walking<T> (walk: () => T): T {
    this.#taking = true
    try {
      return walk()
    } finally {
      this.#taking = false
      const freed = this.#freed
      this.#freed = null
      if (freed !== null) this.#freeParked(freed)
    }
  }

  #take (limits: BatchLimits, at: TakeMoment, expired: WriteOp[]): Batch | null {
    const now = at.now
    if (this.ordered && this.#out > 0) return null
    if (this.#freshOnly && !this.ordered) return this.#takeFresh(limits, now, expired)
    if (this.#freshOut.size > 0) this.#holdFreshOut()
    this.#lingering.end = 0
    const { maxCount, maxBytes, coalesce } = limits
    const items = this.#list.items
    const end = items.length
    let ops = null as WriteOp[] | null
    let command = -1
    let bytes = 0
    let blocked = null as Set<string> | null
    let kept = null as WriteOp[] | null
    let i = this.#list.head
    for (; i < end; i++) {
      const op = items[i] as WriteOp
      if (!this.#live(op, now, expired)) continue
      if (ops !== null && (ops.length >= maxCount || bytes + op.bytes > maxBytes)) break
      const target = op.target
      const c = COMMAND_OF[op.kind] as number
      if (op.lingerUntil > now && !at.flushing) {
        // still waiting for company of its own target: it stays, and so do later writes of that
        // target (of the whole queue, when ordered); the linger timer wakes the pump at its end
        this.#lingering.noteEnd(op.lingerUntil)
        if (this.ordered) break
        ;(kept ??= []).push(op)
        ;(blocked ??= new Set()).add(target)
        continue
      }
      this.#lingering.left(op)
      const holder = this.ordered ? undefined : this.#held.get(target)
      if (this.ordered) {
        // strict submission order: a run of one command from the head
        if (command !== -1 && c !== command) break
      } else if (holder !== undefined) {
        // held by an op out, or taken into this batch (QUEUED: it may coalesce unless one was skipped)
        if (coalesce && holder.state === QUEUED && blocked?.has(target) !== true && !this.#parked.has(target) && !op.alone && !holder.alone &&
          bytes + op.bytes <= maxBytes && tryCoalesce(holder, op)) {
          this.#coalesced++
          bytes += op.bytes // the coalesced update grows: it counts against the batch budget
          this.forget(op)
          continue
        }
        this.#parked.park(target, op) // it cannot go before its holder returns
        continue
      } else if (blocked?.has(target) === true || (command !== -1 && c !== command)) {
        ;(kept ??= []).push(op)
        ;(blocked ??= new Set()).add(target)
        continue
      }
      command = c
      ;(ops ??= []).push(op)
      this.#held.set(target, op)
      this.#parked.taken(target, op)
      bytes += op.bytes
      this.forget(op)
      // writes of its target parked behind an earlier holder may coalesce into it now
      if (coalesce && !op.alone && this.#parked.has(target)) bytes += this.#parked.coalesceInto(op, target, maxBytes - bytes, this.#merged)
    }
    // skipped ops (a subsequence of items[head, i)) go back just before i: the tail is never copied
    let head = i
    if (kept !== null) {
      for (let k = kept.length - 1; k >= 0; k--) items[--head] = kept[k] as WriteOp
    }
    this.#advance(head, end)
    if (ops === null) return null
    this.#out++
    this.#inFlight++
    return this.#stamped(new Batch(this, ops, false))
  }

  /** A parked write coalesced into its new holder: it leaves the queue's count. */
  readonly #merged = (op: WriteOp): void => {
    this.#coalesced++
    this.forget(op)
  }

  /** Puts unparked ops (still counted) back at the head of the queue. */
  #toHead (ops: WriteOp[]): void {
    if (ops.length === 0) return
    this.#freshOnly = false
    this.#list.putFirst(ops)
    this.listener.queued(this)
  }

  #takeFresh (limits: BatchLimits, now: number, expired: WriteOp[]): Batch | null {
    const items = this.#list.items
    const end = items.length
    let ops = null as WriteOp[] | null
    let bytes = 0
    let i = this.#list.head
    for (; i < end; i++) {
      const op = items[i] as WriteOp
      if (!this.#live(op, now, expired)) continue
      if (ops !== null && (ops.length >= limits.maxCount || bytes + op.bytes > limits.maxBytes)) break
      ;(ops ??= []).push(op)
      bytes += op.bytes
    }
    this.#advance(i, end)
    if (ops === null) return null
    this.#size -= ops.length
    this.#bytes -= bytes
    this.#out++
    this.#inFlight++
    const batch = this.#stamped(new Batch(this, ops, true))
    this.#freshOut.add(batch)
    return batch
  }

  /** Per batch: the queue wait starts over for what stays queued. */
  #stamped (batch: Batch): Batch {
    batch.queuedAt = this.#nonEmptySince
    if (this.#size > 0) this.#nonEmptySince = performance.now()
    return batch
  }

  #holdFreshOut (): void {
    for (const batch of this.#freshOut) for (const op of batch.ops) this.#held.set(op.target, op)
    this.#freshOut.clear()
  }

  #advance (head: number, end: number): void {
    if (this.#list.advance(head, end)) this.#freshOnly = this.#parked.size === 0
  }

  /** A batch's answer was handled: its targets are free again. */
  returned (batch: Batch): void {
    this.#inFlight--
    this.#release(batch)
  }

  #release (batch: Batch): void {
    this.#out--
    if (this.#freshOut.delete(batch)) return
    const unparked: WriteOp[] = []
    for (const op of batch.ops) {
      this.#held.delete(op.target)
      // an op put back in the queue (partly failed, uncoalesced) still goes before what is
      // parked behind it: that stays parked until it is taken again
      if (this.#parked.size > 0 && op.state !== QUEUED) this.#parked.release(op.target, unparked)
    }
    this.#toHead(unparked)
  }

  /** A waiting batch (retry, fence) was given up (close): its targets are free again. */
  abandonWait (batch: Batch): void {
    this.#release(batch)
  }

  /** `batch` waits to be retried: it is out again and holds its targets meanwhile. */
  holdForRetry (batch: Batch): void {
    this.#out++
    for (const op of batch.ops) this.#held.set(op.target, op)
  }

  /** The retry wait is over: its unsettled ops go back to the head of the queue, in order. */
  endRetryWait (batch: Batch): void {
    this.#out--
    const live: WriteOp[] = []
    const unparked: WriteOp[] = []
    for (const op of batch.ops) {
      this.#held.delete(op.target)
      if (op.state === IN_FLIGHT) {
        op.sendAgain()
        live.push(op)
      } else if (this.#parked.size > 0) {
        this.#parked.release(op.target, unparked) // settled (fenced): what was parked behind it may go
      }
    }
    // a retried write goes first; writes parked behind it stay parked until it is taken
    this.#toHead(unparked)
    this.requeueFront(live)
  }

  /** Puts ops (state QUEUED) back at the head, in their original order (retries, ordered leftovers). */
  requeueFront (ops: WriteOp[]): void {
    if (ops.length === 0) return
    if (this.#size === 0) this.#nonEmptySince = performance.now()
    for (const op of ops) {
      if (!op.fresh) this.#freshOnly = false
      this.#size++
      this.#bytes += op.bytes
    }
    this.#list.putFirst(ops)
    this.listener.queued(this)
  }

  /** `n` writes coalesced earlier were taken apart again (stats). */
  uncoalesced (n: number): void { this.#coalesced -= n }

  /** Removes and returns every op still queued (close() timed out). */
  removeAll (): WriteOp[] {
    this.#lingering.clear()
    const out: WriteOp[] = []
    const queued = (op: WriteOp): void => { if (op.state === QUEUED) out.push(op) }
    this.#list.forEach(queued)
    this.#parked.forEach(queued)
    this.#parked.clear()
    this.#list.clear()
    this.#size = 0
    this.#bytes = 0
    this.#freshOnly = true
    return out
  }

  /** Ops past their deadline, removed from the queue (they stay in the list, skipped). */
  expire (now: number, expired: WriteOp[]): void {
    this.#walking(() => {
      this.#list.forEach(op => { this.#live(op, now, expired) })
      this.#parked.forEach(op => { this.#live(op, now, expired) })
    })
  }

  /** Whether a queued op can be taken; one past its deadline leaves the queue for `expired`. */
  #live (op: WriteOp, now: number, expired: WriteOp[]): boolean {
    if (op.state !== QUEUED) return false
    if (op.deadline > 0 && op.deadline <= now) {
      this.forget(op)
      op.leaveQueue()
      expired.push(op)
      return false
    }
    return true
  }
}
