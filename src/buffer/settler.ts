import type { ReadCache } from '../cache/read-cache.js'
import {
  CREATED, SETTLED, WAITING, type WriteOp, type WriteResult,
} from '../write/write-op.js'
import { resultOf } from './outcomes.js'
import type { Admission } from './admission.js'
import type { FlushTracker } from './flush-tracker.js'

const EMPTY: Readonly<Record<string, never>> = Object.freeze({})
const ignore = (): void => {}

// One executor for every write's promise (it runs synchronously inside `new Promise`),
// instead of a fresh closure per write.
let opening: WriteOp | null = null
function takeResolvers (resolve: (r: WriteResult) => void, reject: (e: Error) => void): void {
  const op = opening as WriteOp
  op.awaitedWith(resolve, reject)
  opening = null
}

/** Room and flush epochs given back by a batch's writes: `run` writes of `epoch` not told to the FlushTracker yet. */
interface Room { writes: number, bytes: number, epoch: number, run: number }

/**
 * The one owner of "settled": creates each write's promise and is the only caller of its
 * resolve/reject. Settling a write also settles the writes coalesced into it, and releases
 * what the write held: its room (Admission), its flush() epoch, its abort listener, its
 * noted write in the read cache. Settling twice is a no-op, so every other module may
 * simply ask for it.
 */
export class Settler {
  /** writes acknowledged by the server */
  acknowledged = 0
  /** writes rejected after reaching the buffer */
  failed = 0

  constructor (
    readonly admission: Admission,
    readonly flushes: FlushTracker,
    readonly cache: ReadCache | undefined,
    /** a detached write failed: told once, never with a promise (see WriteBuffer's onWriteError) */
    readonly detachedFailed: (op: WriteOp, err: Error) => void
  ) {}

  /** The promise the caller of `op` awaits. */
  open (op: WriteOp): Promise<WriteResult> {
    opening = op
    const promise = new Promise<WriteResult>(takeResolvers)
    op.joinEpoch(this.flushes.open())
    return promise
  }

  /** A detached write: no promise exists, so none can go unhandled; a failure goes to `detachedFailed`. */
  openDetached (op: WriteOp): void {
    op.detach(ignore, err => { this.detachedFailed(op, err) })
    op.joinEpoch(this.flushes.open())
  }

  /** Resolves `op` with `value` and the writes coalesced into it with `{}`; returns how many settled. */
  resolve (op: WriteOp, value: WriteResult): number {
    if (op.state === SETTLED) return 0
    // callers first, bookkeeping after: a flush() waiting on these writes then resumes
    // after their own continuations
    op.resolve(value)
    this.#release(op, true)
    let n = 1
    if (op.coalesced !== null) {
      // only the first of a coalesced sequence could have upserted
      for (const c of op.coalesced) {
        if (c.state === SETTLED) continue
        c.resolve(EMPTY)
        this.#release(c, true)
        n++
      }
    }
    this.acknowledged += n
    return n
  }

  /**
   * Resolves the writes of an acknowledged batch, each with its result (`upsertedIds`: the
   * server's, by index) and the writes coalesced into it with `{}`; returns how many settled.
   * As `resolve` for each, but what is counted per write goes back at once: the room after
   * every caller was told, and the flush() epochs per run of writes of one epoch, as it ends.
   */
  resolveAll (ops: readonly WriteOp[], upsertedIds: Record<number, unknown> | undefined): number {
    const room: Room = { writes: 0, bytes: 0, epoch: 0, run: 0 }
    let n = 0
    try {
      for (let i = 0; i < ops.length; i++) {
        const op = ops[i] as WriteOp
        if (op.state === SETTLED) continue
        op.resolve(resultOf(op, i, upsertedIds))
        this.#releaseAcknowledged(op, room)
        n++
        if (op.coalesced === null) continue
        // only the first of a coalesced sequence could have upserted
        for (const c of op.coalesced) {
          if (c.state === SETTLED) continue
          c.resolve(EMPTY)
          this.#releaseAcknowledged(c, room)
          n++
        }
      }
    } finally {
      // also when reading a result broke half-way: the writes settled so far give theirs back
      this.acknowledged += n
      if (room.run > 0) this.flushes.settle(room.epoch, room.run)
      if (room.writes > 0) this.admission.leftAll(room.writes, room.bytes)
    }
    return n
  }

  /** #release for an acknowledged write of a batch, but its room and flush epoch are summed in `room`. */
  #releaseAcknowledged (op: WriteOp, room: Room): void {
    const was = op.settle()
    op.unlisten()
    if (op.epoch !== room.epoch) {
      if (room.run > 0) this.flushes.settle(room.epoch, room.run)
      room.epoch = op.epoch
      room.run = 0
    }
    room.run++
    if (was === CREATED) return // as in #release (none is, in a batch sent)
    if (was === WAITING) {
      this.admission.leftWaiting()
    } else {
      room.writes++
      room.bytes += op.bytes
    }
    this.cache?.settleWrite(op.queue.name, op, true, false)
  }

  /** Rejects `op` and the writes coalesced into it with `err`; returns how many settled. */
  reject (op: WriteOp, err: Error): number {
    let n = this.#rejectOne(op, err)
    if (op.coalesced !== null) for (const c of op.coalesced) n += this.#rejectOne(c, err)
    return n
  }

  #rejectOne (op: WriteOp, err: Error): number {
    if (op.state === SETTLED) return 0
    op.reject(err)
    this.#release(op, false, (err as { outcome?: unknown }).outcome === 'unknown')
    this.failed++
    return 1
  }

  #release (op: WriteOp, ok: boolean, unknown = false): void {
    const was = op.settle()
    op.unlisten()
    this.flushes.settle(op.epoch)
    if (was === CREATED) return // refused at the door: never counted, never seen by the cache
    this.cache?.settleWrite(op.queue.name, op, ok, unknown)
    if (was === WAITING) this.admission.leftWaiting()
    else this.admission.left(op)
  }
}
