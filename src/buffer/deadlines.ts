import { realClock, type Clock, type ClockTimer } from '../clock.js'
import { AsyncResource } from 'node:async_hooks'
import { ErrorCodes, WriteBufferError, type WriteOutcome } from '../errors.js'
import type { WriteOp } from '../write/write-op.js'

export function timeoutError (op: WriteOp): WriteBufferError {
  const outcome: WriteOutcome = op.maybeApplied ? 'unknown' : 'not-sent'
  return new WriteBufferError(ErrorCodes.TIMEOUT, 'write timed out before it could be sent', outcome, op.attempts)
}

export interface DeadlineScope {
  /** moves the ops past their deadline (still queued or waiting for room) into `expired` */
  expire: (now: number, expired: WriteOp[]) => void
  /** rejects one expired op */
  timedOut: (op: WriteOp) => void
  /** whether any write may still have a deadline to watch */
  busy: () => boolean
}

const SWEEP_MS = 50

/**
 * Per-write deadlines (`timeoutMs` / `writeTimeoutMs`). One shared, unref'd timer sweeps the
 * writes still queued or waiting for room, so a stalled server cannot hold them past their
 * deadline; a write already on the wire waits for the driver (bound it with the client's
 * socketTimeoutMS / timeoutMS). Batches built meanwhile drop expired writes too.
 */
export class Deadlines {
  #timer: ClockTimer | null = null
  /** bound to the buffer's construction context: a sweep belongs to no caller */
  readonly #sweepTask = AsyncResource.bind((): void => { this.#sweep() })

  constructor (readonly defaultMs: number, readonly scope: DeadlineScope, readonly clock: Clock = realClock) {}

  /** Sets `op`'s deadline from its own timeout or the default, and returns that timeout (ms); 0 = none. */
  start (op: WriteOp, timeoutMs: number | undefined): number {
    const ms = timeoutMs ?? this.defaultMs
    if (ms <= 0) return 0
    op.timeOutAt(this.clock.now() + ms)
    this.#arm()
    return ms
  }

  #arm (): void {
    if (this.#timer !== null) return
    this.#timer = this.clock.setTimeout(this.#sweepTask, SWEEP_MS)
    this.#timer.unref()
  }

  #sweep (): void {
    this.#timer = null
    const expired: WriteOp[] = []
    this.scope.expire(this.clock.now(), expired)
    for (const op of expired) this.scope.timedOut(op)
    if (this.scope.busy()) this.#arm()
  }

  stop (): void {
    if (this.#timer !== null) this.clock.clearTimeout(this.#timer)
    this.#timer = null
  }
}
