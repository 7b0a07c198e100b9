/**
 * Collections with a write told `unknown` whose attempt may still be applied: the Sender's
 * fence after an ambiguous failure (buffer/retries.ts), until the attempt can no longer apply.
 * An answer read while such a fence stands may be older than that write (docs/server-behaviours.md: a timed-out attempt may still apply; `maxTimeMS` starts when the server reads the command): the
 * read cache does not keep it; nor one read before a fence ended, which the read cache marks on
 * its reads in progress when it ends (read-cache.ts#fenced), so nothing is kept per collection
 * once its fences are gone.
 */
export class Fences {
  /** fences standing, by collection */
  readonly #open = new Map<string, number>()

  start (name: string): void {
    this.#open.set(name, (this.#open.get(name) ?? 0) + 1)
  }

  end (name: string): void {
    const left = (this.#open.get(name) ?? 1) - 1
    if (left > 0) this.#open.set(name, left)
    else this.#open.delete(name)
  }

  /** Whether no fence stands in `name`. */
  allows (name: string): boolean {
    return this.#open.size === 0 || !this.#open.has(name)
  }
}
