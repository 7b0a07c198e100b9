/**
 * What `flush()` waits for: every write submitted before the call has settled.
 *
 * Writes are counted per epoch (a plain number on the op: no per-write allocation). A
 * `flush()` closes the current epoch and resolves once that epoch and all earlier ones have
 * no unsettled write left; writes submitted after the call belong to later epochs and never
 * hold it up.
 */
interface Waiter { epoch: number, resolve: () => void }

export class FlushTracker {
  #epoch = 0
  #base = 0
  /** unsettled writes per epoch, from `#base` on */
  readonly #counts: number[] = [0]
  #unsettled = 0
  readonly #awaiting: Waiter[] = []

  get unsettled (): number { return this.#unsettled }
  /** a flush() is waiting for writes to settle */
  get awaited (): boolean { return this.#awaiting.length > 0 }

  /** A write was submitted: returns the epoch to hand back to `settle`. */
  open (): number {
    const i = this.#epoch - this.#base
    this.#counts[i] = (this.#counts[i] ?? 0) + 1
    this.#unsettled++
    return this.#epoch
  }

  /** `writes` writes opened in `epoch` settled. */
  settle (epoch: number, writes = 1): void {
    const i = epoch - this.#base
    const left = (this.#counts[i] ?? 0) - writes
    this.#counts[i] = left
    this.#unsettled -= writes
    if (i !== 0 || left !== 0 || this.#awaiting.length === 0) return
    // drop every leading epoch that has nothing unsettled (the current one always stays)
    let done = 0
    while (done < this.#counts.length - 1 && this.#counts[done] === 0) done++
    this.#counts.splice(0, done)
    this.#base += done
    const waiters = this.#awaiting
    while (waiters.length > 0 && (waiters[0] as Waiter).epoch < this.#base) (waiters.shift() as Waiter).resolve()
  }

  /** Resolves when every write opened so far has settled. */
  flush (): Promise<void> {
    if (this.#unsettled === 0) return Promise.resolve()
    const p = new Promise<void>(resolve => { this.#awaiting.push({ epoch: this.#epoch, resolve }) })
    this.#epoch++
    this.#counts.push(0)
    return p
  }
}
