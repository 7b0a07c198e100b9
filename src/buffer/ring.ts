/**
 * A place in a Ring, owned by its item: each item carries one link per ring it can be in (a
 * CollectionQueue has one for the Dispatcher's `active` ring and one for its `ready` ring), so
 * joining, leaving and moving to the back allocate nothing and look nothing up.
 */
export class RingLink<T> {
  /** neighbours while in a ring (null at the ends) */
  prev: RingLink<T> | null = null
  next: RingLink<T> | null = null
  /** whether the link is in its ring */
  linked = false

  constructor (readonly item: T) {}
}

/**
 * A FIFO of distinct items, intrusive: the items' own links are chained. `add` (to the back,
 * unless present), `shift`, `delete` and `size` are O(1) and allocate nothing (`link.linked`
 * tells whether an item is in); memory is the links, made once per item. (A Set walked from its front after deletions skipped their
 * tombstones on every walk, which made a pump over 10,000 collections quadratic; a Map of
 * places grew and shrank its table as queues joined and left — a rehash every few batches.)
 */
export class Ring<T> {
  #head: RingLink<T> | null = null
  #tail: RingLink<T> | null = null
  #size = 0

  get size (): number { return this.#size }

  /** To the back, unless present (a deleted item comes back at the back). */
  add (link: RingLink<T>): void {
    if (link.linked) return
    link.linked = true
    link.prev = this.#tail
    link.next = null
    if (this.#tail === null) this.#head = link
    else this.#tail.next = link
    this.#tail = link
    this.#size++
  }

  delete (link: RingLink<T>): void {
    if (!link.linked) return
    link.linked = false
    const { prev, next } = link
    if (prev === null) this.#head = next
    else prev.next = next
    if (next === null) this.#tail = prev
    else next.prev = prev
    link.prev = null
    link.next = null
    this.#size--
  }

  /** To the back, present or not. */
  toBack (link: RingLink<T>): void {
    if (link.linked && this.#tail === link) return
    this.delete(link)
    this.add(link)
  }

  /** The front item, removed; undefined when empty. */
  shift (): T | undefined {
    const link = this.#head
    if (link === null) return undefined
    this.delete(link)
    return link.item
  }
}
