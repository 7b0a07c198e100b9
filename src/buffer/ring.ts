/**
 * A FIFO of distinct items: `add` (to the back, unless present), `shift`, `delete`, `has` and
 * `size` in O(1) amortized, and nothing ever walks removed items more than once. (A Set walked
 * from its front after deletions there skips their tombstones on every walk: O(removed) per
 * walk, which made a pump over 10,000 collections quadratic.) `delete` is lazy: it forgets the
 * item's place, and the stale entry is dropped when it reaches the front or when stale entries
 * outnumber live ones (rebuilt on `add`): memory stays O(live items) even when nothing shifts —
 * the Dispatcher deletes and re-adds a queue on every batch, and shifts its `active` ring only
 * when something is due.
 */
export class Ring<T> {
  #items: Array<T | undefined> = []
  #head = 0
  /** item → the index of its live entry in #items (any earlier entry of it is stale) */
  readonly #at = new Map<T, number>()

  get size (): number { return this.#at.size }

  /** entries held, live and stale (tests: it stays proportional to `size`) */
  get held (): number { return this.#items.length - this.#head }

  has (item: T): boolean { return this.#at.has(item) }

  /** To the back, unless present (a deleted item comes back at the back). */
  add (item: T): void {
    if (this.#at.has(item)) return
    if (this.#items.length - this.#head > 2 * this.#at.size + 1024) this.#rebuild()
    this.#at.set(item, this.#items.length)
    this.#items.push(item)
  }

  delete (item: T): void { this.#at.delete(item) }

  /** The front item, removed; undefined when empty. */
  shift (): T | undefined {
    const items = this.#items
    while (this.#head < items.length) {
      const i = this.#head++
      const item = items[i] as T
      items[i] = undefined
      if (this.#at.get(item) === i) {
        this.#at.delete(item)
        this.#compact()
        return item
      }
    }
    this.#compact()
    return undefined
  }

  #compact (): void {
    if (this.#head === this.#items.length) {
      this.#items = []
      this.#head = 0
    } else if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
      this.#rebuild()
    }
  }

  /** Keeps the live entries, in order; drops the stale ones. */
  #rebuild (): void {
    const live: T[] = []
    for (let i = this.#head; i < this.#items.length; i++) {
      const item = this.#items[i] as T
      if (this.#at.get(item) === i) {
        this.#at.set(item, live.length)
        live.push(item)
      }
    }
    this.#items = live
    this.#head = 0
  }
}
