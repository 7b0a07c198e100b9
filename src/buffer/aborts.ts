import { ErrorCodes, WriteBufferError } from '../errors.js'
import { QUEUED, WAITING, type WriteOp } from '../write/write-op.js'
import type { Settler } from './settler.js'

export function abortError (attempts: number): WriteBufferError {
  return new WriteBufferError(ErrorCodes.ABORTED, 'write aborted before it was sent', 'not-sent', attempts)
}

/**
 * A write's AbortSignal: aborting drops the write while it has never been sent (queued or
 * waiting for room). Once sent it may already be applied, so its caller learns the real
 * result — and so it does when its update already travels with other writes (coalesced into
 * an earlier write, or carrying later ones): it goes with them. The Settler removes the
 * listener when the write settles.
 */
export class Aborts {
  constructor (readonly settler: Settler) {}

  /** Returns false when the signal has already aborted (the write must not be queued). */
  watch (op: WriteOp, signal: AbortSignal): boolean {
    if (signal.aborted) return false
    op.listen(signal, () => { this.#abort(op) })
    return true
  }

  #abort (op: WriteOp): void {
    // a write others were coalesced into carries their updates too, and a write coalesced
    // into another is part of that one's update: either goes, as if sent
    if (op.state === QUEUED && op.attempts === 0 && op.coalesced === null && !op.merged) {
      op.queue.forget(op)
      this.settler.reject(op, abortError(0))
    } else if (op.state === WAITING) {
      this.settler.reject(op, abortError(0))
    }
  }
}
