/**
 * A FIFO of distinct items: `add` (to the back, unless present), `shift`, `delete`, `has` and
 * `size` in O(1), and nothing ever walks removed items. (A Set walked from its front after
 * deletions there skips their tombstones on every walk: O(removed) per walk, which made a
 * pump over 10,000 collections quadratic.) `delete` is lazy: the stale entry is dropped when
 * it reaches the front.
 */
export class Ring<T> {
  #items: Array<T | undefined> = []
  #head = 0
  readonly #members = new Set<T>()

  get size (): number { return this.#members.size }

  has (item: T): boolean { return this.#members.has(item) }

  add (item: T): void {
    if (this.#members.has(item)) return
    this.#members.add(item)
    this.#items.push(item)
  }

  delete (item: T): void { this.#members.delete(item) }

  /** The front item, removed; undefined when empty. */
  shift (): T | undefined {
    const items = this.#items
    while (this.#head < items.length) {
      const item = items[this.#head] as T
      items[this.#head++] = undefined
      if (this.#members.delete(item)) {
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
      this.#items = this.#items.slice(this.#head)
      this.#head = 0
    }
  }
}
