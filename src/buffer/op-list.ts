import type { WriteOp } from '../write/write-op.js'

/**
 * A queue's writes in order, consumed from a head index instead of shifted: the slots before
 * `head` are spent, and a take puts what it skipped back just before where it stopped (so the
 * tail is never copied). Aborted or expired writes stay in the list, skipped by state.
 */
export class OpList {
  items: WriteOp[] = []
  head = 0

  push (op: WriteOp): void { this.items.push(op) }

  /**
   * A take walked up to `stop`, skipping `kept` (a subsequence of the writes it walked): they go
   * back just before `stop`, in order, so the tail is never copied, and the list resumes there.
   * True when nothing is left.
   */
  resume (stop: number, kept: readonly WriteOp[] | null): boolean {
    let head = stop
    if (kept !== null) for (let k = kept.length - 1; k >= 0; k--) this.items[--head] = kept[k] as WriteOp
    const end = this.items.length
    if (head >= end) {
      this.clear()
      return true
    }
    if (head > 1024 && head * 2 > end) {
      this.items = this.items.slice(head)
      this.head = 0
    } else {
      this.head = head
    }
    return false
  }

  /** Puts `ops` first, in order: into spent slots when there is room, else by one copy. */
  putFirst (ops: readonly WriteOp[]): void {
    if (this.head >= ops.length) {
      for (let k = ops.length - 1; k >= 0; k--) this.items[--this.head] = ops[k] as WriteOp
    } else {
      this.items = ops.concat(this.items.slice(this.head))
      this.head = 0
    }
  }

  /** Each write from the head on. */
  forEach (fn: (op: WriteOp) => void): void {
    const items = this.items
    for (let i = this.head; i < items.length; i++) fn(items[i] as WriteOp)
  }

  clear (): void {
    // a small array is reused (a queue empties once per batch: a new one each time was garbage
    // per batch); a large one is let go, so one burst does not pin its memory
    if (this.items.length <= 1024) this.items.length = 0
    else this.items = []
    this.head = 0
  }
}
