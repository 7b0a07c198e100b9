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

/**
 * What settling writes gives back, summed while they settle and given back at once
 * (Settler#giveBack): `writes` admitted writes of `bytes` in all, and `run` writes of `epoch`
 * not told to the FlushTracker yet.
 */
interface Room { writes: number, bytes: number, epoch: number, run: number }
const emptyRoom = (): Room => ({ writes: 0, bytes: 0, epoch: 0, run: 0 })

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
    const room = emptyRoom()
    try {
      return this.#resolve(op, value, room)
    } finally {
      this.#giveBack(room)
    }
  }

  /**
   * Resolves the writes of an acknowledged batch, each with its result (`upsertedIds`: the
   * server's, by index); returns how many settled. As `resolve` for each, but the room and the
   * flush() epochs go back once for the batch (#giveBack), after every caller was told.
   */
  resolveAll (ops: readonly WriteOp[], upsertedIds: Record<number, unknown> | undefined): number {
    const room = emptyRoom()
    let n = 0
    try {
      for (let i = 0; i < ops.length; i++) {
        const op = ops[i] as WriteOp
        if (op.state !== SETTLED) n += this.#resolve(op, resultOf(op, i, upsertedIds), room)
      }
    } finally {
      // also when reading a result broke half-way: the writes settled so far give theirs back
      this.#giveBack(room)
    }
    return n
  }

  #resolve (op: WriteOp, value: WriteResult, room: Room): number {
    if (op.state === SETTLED) return 0
    // callers first, bookkeeping after: a flush() waiting on these writes then resumes
    // after their own continuations
    op.resolve(value)
    this.#release(op, true, false, room)
    let n = 1
    if (op.coalesced !== null) {
      // only the first of a coalesced sequence could have upserted
      for (const c of op.coalesced) {
        if (c.state === SETTLED) continue
        c.resolve(EMPTY)
        this.#release(c, true, false, room)
        n++
      }
    }
    this.acknowledged += n
    return n
  }

  /** Rejects `op` and the writes coalesced into it with `err`; returns how many settled. */
  reject (op: WriteOp, err: Error): number {
    const room = emptyRoom()
    try {
      let n = this.#rejectOne(op, err, room)
      if (op.coalesced !== null) for (const c of op.coalesced) n += this.#rejectOne(c, err, room)
      return n
    } finally {
      this.#giveBack(room)
    }
  }

  #rejectOne (op: WriteOp, err: Error, room: Room): number {
    if (op.state === SETTLED) return 0
    op.reject(err)
    this.#release(op, false, (err as { outcome?: unknown }).outcome === 'unknown', room)
    this.failed++
    return 1
  }

  /** What `op` held is released; its room and flush epoch are summed in `room`, for #giveBack. */
  #release (op: WriteOp, ok: boolean, unknown: boolean, room: Room): void {
    const was = op.settle()
    op.unlisten()
    if (op.epoch !== room.epoch) {
      if (room.run > 0) this.flushes.settle(room.epoch, room.run)
      room.epoch = op.epoch
      room.run = 0
    }
    room.run++
    if (was === CREATED) return // refused at the door: never counted, never seen by the cache
    if (was === WAITING) {
      this.admission.leftWaiting()
    } else {
      room.writes++
      room.bytes += op.bytes
    }
    this.cache?.settleWrite(op.queue.name, op, ok, unknown)
  }

  /** The room and the flush epochs summed in `room` go back: to Admission (its waiters), to the FlushTracker. */
  #giveBack (room: Room): void {
    if (room.run > 0) this.flushes.settle(room.epoch, room.run)
    if (room.writes > 0) this.admission.left(room.writes, room.bytes)
  }
}
