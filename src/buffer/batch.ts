import type { ClockTimer } from '../clock.js'
import type { AnyBulkWriteOperation } from 'mongodb'
import type { TraceLink, WriteOp } from '../write/write-op.js'

/**
 * How a batch travels, decided once per batch (wire.ts Wire#routeOf) and kept for every part of it
 * (isolation's halves), so its answer is read as what was sent:
 * - BULK_WRITE: the driver's bulkWrite; on a replica set the driver may send it again on its
 *   own (retryable writes), so an error may answer a second attempt;
 * - COMMAND: the one write command (write-command.ts) through `db.command`, which the driver
 *   never sends again on its own.
 */
export const BULK_WRITE = 0
export const COMMAND = 1
export type Route = typeof BULK_WRITE | typeof COMMAND

/** Limits of one take. */
export interface BatchLimits { maxCount: number, maxBytes: number, coalesce: boolean }

/** Lingering writes are taken once their linger ended, or at once when the buffer is flushing. */
export interface TakeMoment { now: number, flushing: boolean }

/**
 * Writes of one collection and one write command, sent together as one bulkWrite (or, after
 * a transient failure, waiting together to be sent again). A batch owns its ops; the writes
 * coalesced into an op travel (and settle) with it. `Q`: the queue it came from and goes back
 * to (a CollectionQueue, which builds batches: this module names no queue, so the dependency
 * points one way).
 */
export class Batch<Q = unknown> {
  /** when a retry is scheduled: the backoff timer */
  retryTimer: ClockTimer | null = null
  /** clock time since when its oldest write (about) waited in the queue */
  queuedAt = 0
  /** set by send(): the span of the failed attempt this send repeats, if traced */
  retryOf: TraceLink | undefined = undefined
  /** set by send(): whether any of its writes captured a span to link to */
  linked = false
  /** how it travels (Route), set by the Sender when it sends it */
  route: Route = BULK_WRITE
  #done = false

  constructor (
    readonly queue: Q,
    readonly ops: WriteOp[],
    /**
     * taken by the queue's fast path (only generated-_id inserts): its targets are not held
     * unless another kind of write shows up while it is out (see CollectionQueue)
     */
    readonly fresh: boolean
  ) {}

  get size (): number { return this.ops.length }

  /**
   * Marks every op as sent once more and returns the bulkWrite models; on the way, notes what
   * the batch's span needs (`retryOf`, taken from its first retried write, and `linked`).
   */
  send (): AnyBulkWriteOperation[] {
    const ops = this.ops
    const models = new Array<AnyBulkWriteOperation>(ops.length)
    let retryOf: TraceLink | undefined
    let linked = false
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i] as WriteOp
      op.send()
      const repeats = op.takeRetryOf() // its next attempt is a child of this one's span, if any
      if (repeats !== undefined) retryOf ??= repeats
      if (op.traceLink !== undefined) linked = true
      if (op.coalesced !== null) {
        for (const c of op.coalesced) {
          c.sendWith(op)
          if (c.traceLink !== undefined) linked = true
        }
      }
      models[i] = op.model
    }
    this.retryOf = retryOf
    this.linked = linked
    return models
  }

  /** True the first time only: a batch's answer is handled once, however it arrives. */
  finish (): boolean {
    if (this.#done) return false
    this.#done = true
    return true
  }

  /** The spans active when its writes (and the writes coalesced into them) were queued. */
  links (): Array<TraceLink | undefined> {
    const out: Array<TraceLink | undefined> = []
    for (const op of this.ops) {
      out.push(op.traceLink)
      if (op.coalesced !== null) for (const c of op.coalesced) out.push(c.traceLink)
    }
    return out
  }

  /** The attempt these ops are on (for the retry backoff). */
  get attempt (): number {
    return this.ops[0]?.attempts ?? 1
  }
}
