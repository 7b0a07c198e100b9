import { tryCoalesce } from '../write/coalesce.js'
import { lingerEndFor, QUEUED, type WriteOp } from '../write/write-op.js'

/**
 * A queue's lingering writes (per-write `lingerMs`): by target, the write that later writes
 * of its target coalesce into as they are pushed, and the earliest end of a linger among the
 * writes the last take left queued (when the Dispatcher's linger timer must wake the pump).
 */
export class Lingering {
  /** Target → the lingering write later writes of that target join. */
  #leaders: Map<string, WriteOp> | null = null // made when a write first lingers
  /** Date.now() when the earliest linger left queued ends; 0 = none */
  end = 0

  get empty (): boolean { return (this.#leaders?.size ?? 0) === 0 }

  /**
   * Coalesces `op` into the lingering write of its target if it can (returns true); otherwise
   * `op` becomes its target's lingering write if it lingers itself. A joining write's deadline
   * brings its leader's end forward: it travels with the leader now.
   */
  join (op: WriteOp, coalesce: boolean): boolean {
    const target = op.target
    const leader = this.#leaders?.get(target)
    if (leader !== undefined) {
      if (coalesce && leader.state === QUEUED && !leader.alone && !op.alone && tryCoalesce(leader, op)) {
        const end = lingerEndFor(op.deadline, leader.lingerUntil)
        if (end < leader.lingerUntil) {
          leader.lingerUntil = end
          this.noteEnd(end)
        }
        return true
      }
      this.#leaders?.delete(target)
    }
    if (op.lingerUntil > 0) (this.#leaders ??= new Map()).set(target, op)
    return false
  }

  /** `op` left the queue (taken, aborted, expired): no later write joins it any more. */
  left (op: WriteOp): void {
    if (op.lingerUntil > 0 && this.#leaders?.get(op.target) === op) this.#leaders.delete(op.target)
  }

  /** A lingering write stays queued until `until`. */
  noteEnd (until: number): void {
    if (this.end === 0 || until < this.end) this.end = until
  }

  clear (): void {
    this.#leaders = null
    this.end = 0
  }
}
