import type { Clock } from '../clock.js'
import { WAITING, type WriteOp } from '../write/write-op.js'

export interface AdmissionLimits { maxPending: number, maxPendingBytes: number, onFullReject: boolean }

/**
 * Room in the buffer: `maxPending` writes and `maxPendingBytes` bytes queued, in flight or
 * waiting to be retried. A write that finds no room waits in FIFO order (onFull: 'wait') or
 * is refused (onFull: 'reject'). While anyone waits, newcomers queue behind them, which
 * keeps same-target writes in submission order.
 */
export class Admission {
  #pending = 0
  #pendingBytes = 0
  #waiters: WriteOp[] = []
  #waitHead = 0
  /** waiters not yet settled (aborted or expired ones stay in `#waiters` until passed) */
  #waiting = 0

  /** `clock`: the time a waiter's deadline is read against */
  constructor (readonly limits: AdmissionLimits, readonly clock: Clock) {}

  get pending (): number { return this.#pending }
  get waiting (): number { return this.#waiting }

  /**
   * Whether `op` is refused at once: the buffer is full and onFull is 'reject'; or, for a
   * detached write (nobody waits on it, so it cannot wait for room either), the buffer holds
   * 2 × maxPending writes already, counting those waiting for room.
   */
  refuses (op: WriteOp, detached: boolean): boolean {
    const { maxPending, maxPendingBytes, onFullReject } = this.limits
    const full = this.#waiting > 0 || this.#pending >= maxPending ||
      (this.#pending > 0 && this.#pendingBytes + op.bytes > maxPendingBytes)
    if (!full) return false
    return onFullReject || (detached && this.#pending + this.#waiting >= 2 * maxPending)
  }

  /**
   * Admits `op` into its queue, or makes it wait for room. Returns false when the buffer is
   * full and onFull is 'reject' (the op is left untouched for the caller to refuse).
   */
  offer (op: WriteOp): boolean {
    const { maxPending, maxPendingBytes, onFullReject } = this.limits
    if (this.#waiting > 0 || this.#pending >= maxPending ||
      (this.#pending > 0 && this.#pendingBytes + op.bytes > maxPendingBytes)) {
      if (onFullReject) return false
      op.waitForRoom()
      this.#waiting++
      this.#waiters.push(op)
      return true
    }
    this.#admit(op)
    return true
  }

  #admit (op: WriteOp): void {
    op.enqueue()
    this.#pending++
    this.#pendingBytes += op.bytes
    op.queue.push(op)
  }

  /** `writes` pending writes of `bytes` in all settled: their room goes to the waiters, in order. */
  left (writes: number, bytes: number): void {
    this.#pending -= writes
    this.#pendingBytes -= bytes
    if (this.#waitHead < this.#waiters.length) this.#admitWaiters()
  }

  /** A waiting op settled (aborted, expired, closed) before it got room: those behind it may fit now. */
  leftWaiting (): void {
    this.#waiting--
    if (this.#waitHead < this.#waiters.length) this.#admitWaiters()
  }

  #admitWaiters (): void {
    const { maxPending, maxPendingBytes } = this.limits
    let now = 0
    while (this.#waitHead < this.#waiters.length && this.#pending < maxPending) {
      const op = this.#waiters[this.#waitHead] as WriteOp
      if (op.state === WAITING && this.#pending > 0 && this.#pendingBytes + op.bytes > maxPendingBytes) break
      // past its deadline: never let in (it would be sent late, or join a lingering write and
      // travel with it while told it timed out); the deadline sweep rejects it where it waits,
      // and those behind it follow then, in order
      if (op.state === WAITING && op.deadline > 0 && op.deadline <= (now ||= this.clock.now())) break
      this.#waitHead++
      if (op.state === WAITING) {
        this.#waiting--
        this.#admit(op)
      }
    }
    if (this.#waitHead === this.#waiters.length) {
      this.#waiters = []
      this.#waitHead = 0
    }
  }

  /** Waiters past their deadline (they stay listed, and are passed over once settled). */
  expire (now: number, expired: WriteOp[]): void {
    for (let i = this.#waitHead; i < this.#waiters.length; i++) {
      const op = this.#waiters[i] as WriteOp
      if (op.state === WAITING && op.deadline > 0 && op.deadline <= now) expired.push(op)
    }
  }

  /** Removes and returns every op still waiting for room (close() timed out). */
  removeAllWaiting (): WriteOp[] {
    const out: WriteOp[] = []
    for (let i = this.#waitHead; i < this.#waiters.length; i++) {
      const op = this.#waiters[i] as WriteOp
      if (op.state === WAITING) out.push(op)
    }
    this.#waiters = []
    this.#waitHead = 0
    return out
  }
}
