import type { Clock } from '../clock.js'
import { mayCoalesce, tryCoalesce } from '../write/coalesce.js'
import { lingerEndFor, QUEUED, type WriteOp } from '../write/write-op.js'

/**
 * A queue's lingering writes (per-write `lingerMs`): by target, the write that later writes
 * of its target coalesce into as they are pushed, and the earliest end of a linger among the
 * writes the last take left queued (when the Dispatcher's linger timer must wake the pump).
 */
export class Lingering {
  /** Target → the lingering write later writes of that target join. */
  #leaders: Map<string, WriteOp> | null = null // made when a write first lingers
  /** clock time when the earliest linger left queued ends; 0 = none */
  end = 0

  /** `maxBytes`: a batch's byte budget, which one write and those joining it never pass together */
  constructor (readonly maxBytes: number, readonly clock: Clock) {}

  get empty (): boolean { return (this.#leaders?.size ?? 0) === 0 }

  /**
   * Coalesces `op` into the lingering write of its target if it can (returns true); otherwise
   * `op` becomes its target's lingering write if it lingers itself. A queued write expires with
   * the writes it carries (the sweep sees leaders only), so `op` joins only where its own
   * deadline is kept (joinable): never past the batch budget either (one merged update must fit
   * in one command, 16 MiB).
   */
  join (op: WriteOp, coalesce: boolean): boolean {
    const target = op.target
    const leader = this.#leaders?.get(target)
    if (leader !== undefined) {
      if (coalesce && joinable(op.deadline, leader.deadline, this.clock) && mayCoalesce(leader, op, this.maxBytes - leader.bytes - leader.carried) &&
        tryCoalesce(leader, op)) {
        return true
      }
      if (op.deadline > 0 && leader.state === QUEUED && (leader.deadline === 0 || op.deadline < leader.deadline)) {
        // it waits behind its leader: the leader goes in time for it, and takes it along then (select.ts)
        const end = lingerEndFor(this.clock.now(), op.deadline, leader.lingerUntil)
        if (end < leader.lingerUntil) {
          leader.linger(end)
          this.noteEnd(end)
        }
      }
      this.#leaders?.delete(target) // nothing later joins it before this write
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

/**
 * Whether a write with deadline `own` may travel with a lingering write whose deadline is
 * `leader`'s (0 = none): both none; or both set, the leader's first — the joiner can then time
 * out with it, early by at most the time the leader has left (so never by more than half of
 * its own wait: with writeTimeoutMs, every write of a linger joins). A joiner whose deadline
 * comes first stays behind and brings the leader's send forward instead; a deadline joining
 * none, or none joining one, would be lost or cut short.
 */
export function joinable (own: number, leader: number, clock: Clock): boolean {
  if (own === 0 || leader === 0) return own === leader
  return own >= leader && own - leader <= leader - clock.now()
}
