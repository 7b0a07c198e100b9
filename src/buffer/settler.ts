import type { ReadCache } from '../cache/read-cache.js'
import {
  CREATED, SETTLED, WAITING, type WriteOp, type WriteResult,
} from '../write/write-op.js'
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
