import type { Collection } from 'mongodb'
import { tryCoalesce } from './coalesce.js'
import { INSERT, KIND_GROUP, QUEUED, type WriteOp } from './write-op.js'

/**
 * The queue of one collection and the rule that picks a batch from it.
 *
 * Ordering: an op is taken only if no earlier op with the same target is still queued
 * (skipped in this pass) or in flight — otherwise two batches could apply them in either
 * order (two writes in one unordered bulkWrite, or in two concurrent ones, have no order).
 * Skipped ops keep their place; the next batch after the in-flight one completes takes them.
 */
export class CollectionQueue {
  items: WriteOp[] = []
  head = 0
  /** live queued ops (aborted/expired ones still in `items` are not counted) */
  size = 0
  bytes = 0
  /** writes merged into an earlier one (stats) */
  coalesced = 0
  /** batches in flight or waiting to be retried */
  busy = 0
  /**
   * Target → the op holding it: taken into the batch being built (still QUEUED: later
   * same-target updates may merge into it), in flight, or in retry backoff. One holder
   * per target: a retried op is re-held only after its batch released it.
   */
  readonly held = new Map<string, WriteOp>()
  /**
   * Fast path. While the queue holds only inserts with an `_id` we generated, no two of
   * them can share a target (or match anything in flight), so batches are taken without
   * any per-op bookkeeping, and their targets are not even computed. Such in-flight
   * batches sit in `freshInFlight`; if another kind of write shows up meanwhile, their
   * targets are held before it is considered (see `#materialize`).
   */
  #freshOnly = true
  readonly #freshInFlight = new Set<WriteOp[]>()

  constructor (
    readonly name: string,
    readonly collection: Collection,
    readonly ordered: boolean,
  ) {}

  push (op: WriteOp): void {
    if (!op.ownId || op.kind !== INSERT) this.#freshOnly = false
    this.items.push(op)
    this.size++
    this.bytes += op.bytes
  }

  /** the op left the queue without being taken (aborted, expired, closed) */
  forget (op: WriteOp): void {
    this.size--
    this.bytes -= op.bytes
  }

  releaseBatch (batch: WriteOp[]): void {
    if (this.#freshInFlight.delete(batch)) return
    for (const op of batch) this.release(op.target)
  }

  #materialize (): void {
    for (const batch of this.#freshInFlight) for (const op of batch) this.hold(op)
    this.#freshInFlight.clear()
  }

  hold (op: WriteOp): void {
    this.held.set(op.target, op)
  }

  release (target: string): void {
    this.held.delete(target)
  }

  /** Puts ops back at the head, in their original order (retries, ordered leftovers). */
  requeueFront (ops: WriteOp[]): void {
    for (const op of ops) if (!op.ownId || op.kind !== INSERT) this.#freshOnly = false
    const rest = this.items.slice(this.head)
    this.items = ops.concat(rest)
    this.head = 0
    for (const op of ops) {
      this.size++
      this.bytes += op.bytes
    }
  }

  /**
   * Picks the next batch: ops of one write-command group (insert / update / delete), at most
   * `maxCount` ops and about `maxBytes`. Ops past their deadline go to `expired`.
   * Returns the ops taken (coalesced ones hang off their leader's `followers`) or null.
   */
  take (maxCount: number, maxBytes: number, coalesce: boolean, now: number, expired: WriteOp[]): WriteOp[] | null {
    if (this.ordered && this.busy > 0) return null
    if (this.#freshOnly && !this.ordered) return this.#takeFresh(maxCount, maxBytes, now, expired)
    if (this.#freshInFlight.size > 0) this.#materialize()
    const items = this.items
    const end = items.length
    let batch = null as WriteOp[] | null
    let group = -1
    let bytes = 0
    let blocked = null as Set<string> | null
    let kept = null as WriteOp[] | null
    let i = this.head
    for (; i < end; i++) {
      const op = items[i] as WriteOp
      if (!this.#live(op, now, expired)) continue
      if (batch !== null && (batch.length >= maxCount || bytes + op.bytes > maxBytes)) break
      const target = op.target
      const g = KIND_GROUP[op.kind] as number
      if (this.ordered) {
        // strict submission order: a run of one command group from the head
        if (group !== -1 && g !== group) break
      } else if (this.held.has(target)) {
        // in flight, or taken into this batch already (still QUEUED): then it may merge into
        // that op, unless an op of the same target was skipped in between
        const leader = this.held.get(target) as WriteOp
        if (coalesce && leader.state === QUEUED && blocked?.has(target) !== true && !op.noMerge && !leader.noMerge &&
          bytes + op.bytes <= maxBytes && tryCoalesce(leader, op)) {
          this.coalesced++
          bytes += op.bytes // the merged update grows: it counts against the batch budget
          this.forget(op)
          continue
        }
        ;(kept ??= []).push(op)
        ;(blocked ??= new Set()).add(target)
        continue
      } else if (blocked?.has(target) === true || (group !== -1 && g !== group)) {
        ;(kept ??= []).push(op)
        ;(blocked ??= new Set()).add(target)
        continue
      }
      group = g
      ;(batch ??= []).push(op)
      this.held.set(target, op)
      bytes += op.bytes
      this.forget(op)
    }
    // Skipped ops are a subsequence of items[head, i): write them back just before i,
    // in order, so the untouched tail is never copied.
    let head = i
    if (kept !== null) {
      for (let k = kept.length - 1; k >= 0; k--) items[--head] = kept[k] as WriteOp
    }
    this.#advance(head, end)
    return batch
  }

  #takeFresh (maxCount: number, maxBytes: number, now: number, expired: WriteOp[]): WriteOp[] | null {
    const items = this.items
    const end = items.length
    let batch = null as WriteOp[] | null
    let bytes = 0
    let i = this.head
    for (; i < end; i++) {
      const op = items[i] as WriteOp
      if (!this.#live(op, now, expired)) continue
      if (batch !== null && (batch.length >= maxCount || bytes + op.bytes > maxBytes)) break
      ;(batch ??= []).push(op)
      bytes += op.bytes
    }
    if (batch !== null) {
      this.size -= batch.length
      this.bytes -= bytes
      this.#freshInFlight.add(batch) // taken = sent at once: its targets are held lazily
    }
    this.#advance(i, end)
    return batch
  }

  #advance (head: number, end: number): void {
    const items = this.items
    if (head >= end) {
      this.items = []
      this.head = 0
      this.#freshOnly = true
    } else if (head > 1024 && head * 2 > end) {
      this.items = items.slice(head)
      this.head = 0
    } else {
      this.head = head
    }
  }

  /** Removes and returns every op still queued (close timeout). */
  drain (): WriteOp[] {
    const out: WriteOp[] = []
    for (let i = this.head; i < this.items.length; i++) {
      const op = this.items[i] as WriteOp
      if (op.state === QUEUED) out.push(op)
    }
    this.items = []
    this.head = 0
    this.size = 0
    this.bytes = 0
    this.#freshOnly = true
    return out
  }

  /** Ops past their deadline, removed from the queue (they stay in `items` as skipped). */
  expire (now: number, expired: WriteOp[]): void {
    for (let i = this.head; i < this.items.length; i++) this.#live(this.items[i] as WriteOp, now, expired)
  }

  /** Whether a queued op can be taken; one past its deadline leaves the queue for `expired`. */
  #live (op: WriteOp, now: number, expired: WriteOp[]): boolean {
    if (op.state !== QUEUED) return false
    if (op.deadline !== 0 && op.deadline <= now) {
      this.forget(op)
      expired.push(op)
      return false
    }
    return true
  }
}
