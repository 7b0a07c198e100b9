/**
 * Collections with a write told `unknown` whose attempt may still be applied: the Sender's
 * fence after an ambiguous failure (buffer/retries.ts), until the attempt can no longer apply.
 * An answer read while such a fence stands, or begun before it ended, may be older than that
 * write (PITFALLS 9, 15): the read cache does not keep it.
 */
export class Fences {
  /** fences standing, by collection */
  readonly #open = new Map<string, number>()
  /** when its last fence ended (performance.now()), by collection */
  readonly #endedAt = new Map<string, number>()

  start (name: string): void {
    this.#open.set(name, (this.#open.get(name) ?? 0) + 1)
  }

  end (name: string): void {
    const left = (this.#open.get(name) ?? 1) - 1
    if (left > 0) this.#open.set(name, left)
    else this.#open.delete(name)
    this.#endedAt.set(name, performance.now())
  }

  /** Whether an answer of `name` read at `readAt` (performance.now()) may be kept. */
  allows (name: string, readAt: number): boolean {
    if (this.#open.size === 0 && this.#endedAt.size === 0) return true
    return !this.#open.has(name) && readAt > (this.#endedAt.get(name) ?? -Infinity)
  }
}
