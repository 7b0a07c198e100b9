import { QUEUED, type WriteOp } from '../write/write-op.js'

/**
 * Writes parked behind the write holding their target (out, fenced, or taken into the batch
 * being built), by target, in submission order — out of the queue's list, so a take never
 * walks them again while they cannot go: 4,000 callers of one document cost a take O(1), not
 * O(4,000). When the target is released its first live parked write goes back to the queue
 * (the *head* the others wait for); the next ones coalesce into it when it is taken
 * (select.ts; `taken` then drops them), or wait for it in turn. A head that leaves
 * before it is taken (aborted, expired) releases the next one.
 */
export class Parked {
  // both made when first needed: most queues never park anything (10,000 collections of
  // inserts cost no maps)
  #chains: Map<string, WriteOp[]> | null = null
  /** Target → the released write, back in the queue, that its parked writes wait for */
  #heads: Map<string, WriteOp> | null = null

  get size (): number { return this.#chains?.size ?? 0 }
  /** some writes are parked, or wait for a head */
  get busy (): boolean { return (this.#chains?.size ?? 0) > 0 || (this.#heads?.size ?? 0) > 0 }
  /** some parked writes wait for a head (see leftAsHead) */
  get hasHeads (): boolean { return (this.#heads?.size ?? 0) > 0 }

  /** The writes parked behind `target`'s holder, oldest first (select() reads them). */
  chainOf (target: string): readonly WriteOp[] | undefined { return this.#chains?.get(target) }

  /**
   * In submission order: a write put back in the queue (taken apart from a refused merge) is
   * older than the writes parked behind its target meanwhile, and goes before them.
   */
  park (target: string, op: WriteOp): void {
    const chain = this.#chains?.get(target)
    if (chain === undefined) {
      (this.#chains ??= new Map()).set(target, [op])
      return
    }
    let i = chain.length
    while (i > 0 && (chain[i - 1] as WriteOp).seq > op.seq) i--
    if (i === chain.length) chain.push(op)
    else chain.splice(i, 0, op)
  }

  /** `target` is free: its first live parked write is pushed to `out` (to go back to the queue's head). */
  release (target: string, out: WriteOp[]): void {
    const chain = this.#chains?.get(target)
    if (chain === undefined) return
    while (chain.length > 0) {
      const op = chain.shift() as WriteOp
      if (live(op)) {
        out.push(op)
        if (chain.length > 0) (this.#heads ??= new Map()).set(target, op)
        break
      }
    }
    if (chain.length === 0) this.#chains?.delete(target)
  }

  /**
   * `op` was taken into a batch: it holds its target now, and its parked writes wait for that;
   * those coalesced into it (select.ts), and those that left meanwhile, are dropped.
   */
  taken (target: string, op: WriteOp): void {
    if (this.#heads?.get(target) === op) this.#heads.delete(target)
    const chain = this.#chains?.get(target)
    if (chain === undefined) return
    let n = 0
    for (; n < chain.length; n++) {
      const next = chain[n] as WriteOp
      if (live(next) && !next.merged) break
    }
    if (n === chain.length) this.#chains?.delete(target)
    else if (n > 0) chain.splice(0, n)
  }

  /** Whether parked writes wait for `op` (released back to the list, not yet taken). */
  isHead (op: WriteOp): boolean {
    return this.#heads?.get(op.target) === op
  }

  /** `op` left the queue without being taken: true when parked writes waited for it (release them). */
  leftAsHead (op: WriteOp): boolean {
    if (this.#heads?.get(op.target) !== op) return false
    this.#heads.delete(op.target)
    return true
  }

  forEach (fn: (op: WriteOp) => void): void {
    for (const chain of (this.#chains?.values() ?? [])) for (const op of chain) fn(op)
  }

  clear (): void {
    this.#chains = null
    this.#heads = null
  }
}

/** Not aborted, expired or settled while parked. */
function live (op: WriteOp): boolean {
  return op.state === QUEUED
}
