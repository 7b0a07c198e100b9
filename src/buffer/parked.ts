import { tryCoalesce } from '../write/coalesce.js'
import { QUEUED, type WriteOp } from '../write/write-op.js'

/**
 * Writes parked behind the write holding their target (out, fenced, or taken into the batch
 * being built), by target, in submission order — out of the queue's list, so a take never
 * walks them again while they cannot go: 4,000 callers of one document cost a take O(1), not
 * O(4,000). When the target is released its first live parked write goes back to the queue
 * (the *head* the others wait for); the next ones coalesce into it when it is taken
 * (`coalesceInto`), or wait for it in turn. A head that leaves before it is taken (aborted,
 * expired) releases the next one.
 */
export class Parked {
  readonly #chains = new Map<string, WriteOp[]>()
  /** Target → the released write, back in the queue, that its parked writes wait for */
  readonly #heads = new Map<string, WriteOp>()

  get size (): number { return this.#chains.size }

  has (target: string): boolean { return this.#chains.has(target) }

  park (target: string, op: WriteOp): void {
    const chain = this.#chains.get(target)
    if (chain === undefined) this.#chains.set(target, [op])
    else chain.push(op)
  }

  /** Coalesces the parked writes of `target` into `holder`, in order, until one cannot; `merged` is told each; returns the bytes added. */
  coalesceInto (holder: WriteOp, target: string, room: number, merged: (op: WriteOp) => void): number {
    const chain = this.#chains.get(target)
    if (chain === undefined) return 0
    let added = 0
    while (chain.length > 0) {
      const next = chain[0] as WriteOp
      if (!live(next)) { chain.shift(); continue }
      if (next.alone || added + next.bytes > room || !tryCoalesce(holder, next)) break
      chain.shift()
      added += next.bytes
      merged(next)
    }
    if (chain.length === 0) this.#chains.delete(target)
    return added
  }

  /** `target` is free: its first live parked write is pushed to `out` (to go back to the queue's head). */
  release (target: string, out: WriteOp[]): void {
    const chain = this.#chains.get(target)
    if (chain === undefined) return
    while (chain.length > 0) {
      const op = chain.shift() as WriteOp
      if (live(op)) {
        out.push(op)
        if (chain.length > 0) this.#heads.set(target, op)
        break
      }
    }
    if (chain.length === 0) this.#chains.delete(target)
  }

  /** `op` was taken into a batch: it holds its target now, and its parked writes wait for that. */
  taken (target: string, op: WriteOp): void {
    if (this.#heads.size > 0 && this.#heads.get(target) === op) this.#heads.delete(target)
  }

  /** `op` left the queue without being taken: true when parked writes waited for it (release them). */
  leftAsHead (op: WriteOp): boolean {
    if (this.#heads.size === 0 || this.#heads.get(op.target) !== op) return false
    this.#heads.delete(op.target)
    return true
  }

  forEach (fn: (op: WriteOp) => void): void {
    for (const chain of this.#chains.values()) for (const op of chain) fn(op)
  }

  clear (): void {
    this.#chains.clear()
    this.#heads.clear()
  }
}

/** Not aborted, expired or settled while parked. */
function live (op: WriteOp): boolean {
  return op.state === QUEUED
}
