import type { Clock } from '../clock.js'
import type { Collection } from 'mongodb'
import { IN_FLIGHT, QUEUED, type WriteOp } from '../write/write-op.js'
import { Batch, type BatchLimits, type TakeMoment } from './batch.js'
import { Lingering } from './lingering.js'
import { OpList } from './op-list.js'
import { Parked } from './parked.js'
import { RingLink } from './ring.js'
import { coalesceChosen, expiredAt, select, selectFresh, type Selection, type Targets } from './select.js'

/**
 * The queue of one collection: its writes, its held targets and parked writes, its counts.
 * Which writes go together is select.ts's rule; `take` applies what it chose.
 *
 * Ordering: an op is taken only if no earlier op with the same target is still queued
 * (skipped in this pass), in flight or backing off — otherwise two batches could
 * apply them in either order (two writes in one unordered bulkWrite, or in two concurrent
 * ones, have no order). Skipped ops keep their place for the next take.
 *
 * Fast path: while the queue holds only generated-_id inserts, no two of them can share a
 * target (or match anything out), so batches are taken without any per-op bookkeeping and
 * their targets are not even computed. Such batches are "fresh"; if another kind of write
 * shows up while they are out, their targets are held before it is considered.
 */
/**
 * What the queue tells whoever schedules sends (the Dispatcher). An interface, not the class:
 * the Dispatcher pumps queues and a queue wakes it, so each names the other, and
 * test/unit/import-cycles.test.ts forbids even a type-only cycle.
 */
export interface QueueListener {
  /** writes were added to `queue` */
  queued: (queue: CollectionQueue) => void
  /** a batch of `queue` returned: its slot is free */
  returned: (queue: CollectionQueue) => void
}

export class CollectionQueue {
  readonly #list = new OpList()
  /** live queued ops (aborted/expired ones still in `#list` are not counted) */
  #size = 0
  #bytes = 0
  #coalesced = 0
  /** batches in flight (on the wire) */
  #inFlight = 0
  /** batches backing off (a retry's backoff, a fence): out, but not on the wire */
  #backingOff = 0
  /**
   * Target → the op holding it: taken into a batch (still QUEUED until sent), out, or fenced.
   * Written by #hold, #holdTaken and #release only.
   */
  #held: Map<string, WriteOp> | null = null // made with the first hold: fresh inserts never hold
  /** an empty map select() fills with the targets its batch takes (#holdTaken) */
  #spare: Map<string, WriteOp> | null = null
  /** later writes of a held target, parked until it is released (parked.ts) */
  readonly #parked = new Parked()
  /** only fresh inserts listed, none parked: cleared as another write enters (#count, #toHead), set again when a take empties the list */
  #freshOnly = true
  /**
   * fresh batches out (made with the first one: a queue of updates never needs it). An array:
   * it holds at most maxInFlight batches, and a Set grew and shrank its table as each came and went.
   */
  #freshOut: Batch<CollectionQueue>[] | null = null
  /** clock time when the queue last became non-empty: the queue wait of a batch's oldest write */
  #nonEmptySince = 0
  /** lingering writes: later writes of their target join them as they are pushed (see push) */
  readonly #lingering: Lingering
  /** its places in the Dispatcher's rings: queues holding writes, and queues that may send (ring.ts) */
  readonly activeLink = new RingLink<CollectionQueue>(this)
  readonly readyLink = new RingLink<CollectionQueue>(this)

  constructor (
    readonly name: string,
    readonly collection: Collection,
    readonly ordered: boolean,
    /** coalesce writes into a lingering one as they are pushed, up to `maxBytes` together */
    readonly coalesce: boolean,
    maxBytes: number,
    readonly listener: QueueListener,
    readonly clock: Clock
  ) {
    this.#lingering = new Lingering(maxBytes, clock)
  }

  get size (): number { return this.#size }
  get bytes (): number { return this.#bytes }
  /** batches of this queue out (in flight or backing off): an ordered queue waits for 0 */
  get out (): number { return this.#inFlight + this.#backingOff }
  /** batches of this queue on the wire */
  get inFlight (): number { return this.#inFlight }
  /** writes coalesced into an earlier one (stats) */
  get coalesced (): number { return this.#coalesced }
  /** clock time when the earliest linger of a write left queued ends; 0 = none */
  get lingerEnd (): number { return this.#lingering.end }
  /** only fresh inserts queued, unordered: none parked, kept or held, so a take can hold all `size` */
  get allFresh (): boolean { return this.#freshOnly && !this.ordered }

  push (op: WriteOp): void {
    if ((!this.#lingering.empty || op.lingerUntil > 0) && !this.ordered && this.#lingering.join(op, this.coalesce)) {
      this.#coalesced++
      this.listener.queued(this)
      return
    }
    if (this.#size === 0) this.#nonEmptySince = this.clock.now()
    this.#count(op)
    this.#list.push(op)
    this.listener.queued(this)
  }

  /** `op` joins the count; a write that is not a fresh insert ends the fast path until the list empties. */
  #count (op: WriteOp): void {
    if (!op.fresh) this.#freshOnly = false
    this.#size++
    this.#bytes += op.bytes
  }

  /** A queued write that will never be sent (aborted, or found expired outside a take) is dequeued. */
  forget (op: WriteOp): void {
    this.#dequeue([op])
  }

  /**
   * The one way writes leave the queue's count: taken into a batch, coalesced into another
   * write, aborted, expired. Writes parked behind one of them that was their *head* go back
   * to the head of the list (the list must be settled: not inside a take's walk).
   */
  #dequeue (ops: readonly WriteOp[] | null): void {
    if (ops === null) return
    const lingering = !this.#lingering.empty
    const heads = this.#parked.hasHeads
    let bytes = 0
    let freed = null as string[] | null
    for (const op of ops) {
      bytes += op.bytes
      if (lingering) this.#lingering.left(op)
      if (heads && this.#parked.leftAsHead(op)) (freed ??= []).push(op.target)
    }
    this.#size -= ops.length
    this.#bytes -= bytes
    if (freed === null) return
    const next: WriteOp[] = []
    for (const target of freed) if (this.#held?.has(target) !== true) this.#parked.release(target, next)
    this.#toHead(next, true)
  }

  /** The next batch: ops of one write command, ≤ maxCount ops, about ≤ maxBytes; expired ops go to `expired`. */
  take (limits: BatchLimits, at: TakeMoment, expired: WriteOp[]): Batch<CollectionQueue> | null {
    if (this.ordered && this.out > 0) return null
    if (this.allFresh) return this.#apply(selectFresh(this.#list, limits, at.now), true, expired)
    if (this.#freshOut !== null && this.#freshOut.length > 0) this.#holdFreshOut()
    return this.#apply(select(this.#list, this.#targets, limits, at, this.ordered, this.#spare), false, expired)
  }

  /** What select() reads of the held and parked targets (made with the first take that needs it). */
  #targetsView: Targets | null = null
  get #targets (): Targets {
    this.#targetsView ??= {
      holder: target => this.#held?.get(target),
      anyHeld: () => this.#held !== null && this.#held.size > 0,
      parkedOf: target => this.#parked.chainOf(target),
      isHead: op => this.#parked.isHead(op),
    }
    return this.#targetsView
  }

  /**
   * Applies a selection: the batch's targets held, the writes coalesced into their leaders,
   * writes parked, the list resumed, then what left dequeued.
   */
  #apply (sel: Selection, fresh: boolean, expiredOut: WriteOp[]): Batch<CollectionQueue> | null {
    const { batch, parked, coalesced } = sel
    if (!fresh) {
      this.#lingering.end = sel.lingerEnd
      if (sel.lingerOver !== null) for (const op of sel.lingerOver) this.#lingering.left(op)
      if (sel.taken !== null) this.#holdTaken(sel.taken)
      if (coalesced !== null) {
        coalesceChosen(sel)
        this.#coalesced += coalesced.length
      }
      if (batch !== null && this.#parked.busy) for (const op of batch) this.#parked.taken(op.target, op)
      if (parked !== null) for (const op of parked) this.#parked.park(op.target, op)
    }
    if (this.#list.resume(sel.stop, sel.kept)) this.#freshOnly = this.#parked.size === 0
    this.#dequeue(batch)
    this.#dequeue(sel.coalesced)
    this.#expired(sel.expired, expiredOut)
    if (batch === null) return null
    this.#inFlight++
    const out = new Batch(this, batch, fresh)
    // the queue wait starts over for what stays queued
    out.queuedAt = this.#nonEmptySince
    if (this.#size > 0) this.#nonEmptySince = this.clock.now()
    if (fresh) (this.#freshOut ??= []).push(out)
    return out
  }

  /** Writes past their deadline leave the queue for `out` (they stay in the list, skipped by state). */
  #expired (ops: WriteOp[] | null, out: WriteOp[]): void {
    if (ops === null) return
    for (const op of ops) {
      op.leaveQueue() // first: a parked write freed by one of them must not be one of them
      out.push(op)
    }
    this.#dequeue(ops)
  }

  /** The fresh batches out hold their targets from now on (a write that may share one is about to be considered). */
  #holdFreshOut (): void {
    for (const batch of this.#freshOut ?? []) this.#hold(batch.ops)
    if (this.#freshOut !== null) this.#freshOut.length = 0
  }

  /** `ops` hold their targets: no later write of those is taken until #release. */
  #hold (ops: readonly WriteOp[]): void {
    const held = (this.#held ??= new Map())
    for (const op of ops) held.set(op.target, op)
  }

  /**
   * The targets a selection's batch takes are held: its map is adopted whole when nothing else
   * is held (no second copy per take), and the map left empty is lent to the next select() to
   * fill (a new Map per take grew its table from empty each time).
   */
  #holdTaken (taken: Map<string, WriteOp>): void {
    if (this.#held === null || this.#held.size === 0) {
      this.#spare = this.#held
      this.#held = taken
    } else {
      for (const [target, op] of taken) this.#held.set(target, op)
      taken.clear()
      this.#spare = taken
    }
  }

  /** A batch's answer was handled: its targets are free again, and the listener is told. */
  returned (batch: Batch<CollectionQueue>): void {
    this.#inFlight--
    this.#release(batch, false)
    this.listener.returned(this)
  }

  /** `batch` waits to be retried (backoff, fence): it is out again and holds its targets meanwhile. */
  startBackoff (batch: Batch<CollectionQueue>): void {
    this.#backingOff++
    this.#hold(batch.ops)
  }

  /** The retry wait is over: its unsettled ops go back to the head of the queue, in order. */
  endBackoff (batch: Batch<CollectionQueue>): void {
    this.#backingOff--
    this.#release(batch, true)
  }

  /** A batch backing off (retry, fence) was given up (close): its targets are free again. */
  abandonBackoff (batch: Batch<CollectionQueue>): void {
    this.#backingOff--
    this.#release(batch, false)
  }

  /**
   * The one release path (a batch returned, its retry wait over or given up): its targets are
   * free, and per target the first write parked behind a write that left goes back to the
   * head of the list. `resend`: its writes still in flight go back to the queue (a retry), first.
   */
  #release (batch: Batch<CollectionQueue>, resend: boolean): void {
    if (this.#freshOut !== null && batch.fresh && removed(this.#freshOut, batch)) return
    let again = null as WriteOp[] | null
    const unparked: WriteOp[] = []
    for (const op of batch.ops) {
      this.#held?.delete(op.target)
      if (resend && op.state === IN_FLIGHT) {
        op.sendAgain()
        ;(again ??= []).push(op)
      } else if (this.#parked.size > 0 && op.state !== QUEUED) {
        // settled (or fenced) writes free what was parked behind them; an op put back in the
        // queue (partly failed, uncoalesced, retried) still goes before what is parked behind
        // it: that stays parked until it is taken again
        this.#parked.release(op.target, unparked)
      }
    }
    this.#toHead(unparked, true)
    if (again !== null) this.#toHead(again, false)
  }

  /** Puts ops (state QUEUED) back at the head, in their original order (retries, ordered leftovers). */
  requeueFront (ops: WriteOp[]): void {
    this.#toHead(ops, false)
  }

  /**
   * Puts ops back at the head of the list, in order, and tells the listener. `counted`: writes
   * released from parking, still counted (they waited behind a held target: no fast path);
   * else writes that left the count (retries, ordered leftovers) join it again.
   */
  #toHead (ops: WriteOp[], counted: boolean): void {
    if (ops.length === 0) return
    if (counted) this.#freshOnly = false
    else {
      if (this.#size === 0) this.#nonEmptySince = this.clock.now()
      for (const op of ops) this.#count(op)
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
    let found = null as WriteOp[] | null
    const check = (op: WriteOp): void => { if (op.state === QUEUED && expiredAt(op, now)) (found ??= []).push(op) }
    this.#list.forEach(check)
    this.#parked.forEach(check)
    this.#expired(found, expired)
  }
}

/** Removes `item` from `items` (order not kept); whether it was there. */
function removed<T> (items: T[], item: T): boolean {
  const i = items.indexOf(item)
  if (i < 0) return false
  const last = items.pop() as T
  if (i < items.length) items[i] = last
  return true
}
