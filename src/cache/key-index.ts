/**
 * Items listed under string keys, per collection (footprint.ts's key space): the entry store
 * lists entries under their answers' keys, the noted writes list writes under their
 * footprints' keys. Adding, removing and looking up a key cost O(1); `under` costs O(items
 * found). A key with one item holds it directly (most keys: an `_id`, a value), a Set only
 * from the second on.
 */
export class KeyIndex<T extends object> {
  readonly #byName = new Map<string, Map<string, T | Set<T>>>()

  has (name: string, key: string): boolean { return this.#byName.get(name)?.has(key) ?? false }

  list (name: string, item: T, keys: readonly string[]): void {
    let index = this.#byName.get(name)
    if (index === undefined) this.#byName.set(name, index = new Map<string, T | Set<T>>())
    for (const key of keys) {
      const at = index.get(key)
      if (at === undefined) index.set(key, item)
      else if (at instanceof Set) at.add(item)
      else if (at !== item) index.set(key, new Set([at, item]))
    }
  }

  unlist (name: string, item: T, keys: readonly string[]): void {
    const index = this.#byName.get(name)
    if (index === undefined) return
    for (const key of keys) {
      const at = index.get(key)
      if (at === item) {
        index.delete(key)
      } else if (at instanceof Set) {
        at.delete(item)
        if (at.size === 1) index.set(key, at.values().next().value as T)
      }
    }
    if (index.size === 0) this.#byName.delete(name)
  }

  /** Whether an item listed under `key` passes `test`. */
  some (name: string, key: string, test: (item: T) => boolean): boolean {
    const at = this.#byName.get(name)?.get(key)
    if (at === undefined) return false
    if (!(at instanceof Set)) return test(at)
    for (const item of at) if (test(item)) return true
    return false
  }

  /** The items listed under any of these keys, each once: a copy (callers may change the index meanwhile). */
  under (name: string, keys: readonly string[]): T[] {
    const index = this.#byName.get(name)
    if (index === undefined) return []
    let out: T[] | undefined
    let seen: Set<T> | undefined
    for (const key of keys) {
      const at = index.get(key)
      if (at === undefined) continue
      if (out === undefined) {
        out = at instanceof Set ? [...at] : [at]
        continue
      }
      seen ??= new Set(out)
      for (const item of at instanceof Set ? at : [at]) {
        if (seen.has(item)) continue
        seen.add(item)
        out.push(item)
      }
    }
    return out ?? []
  }

  clear (): void { this.#byName.clear() }
}
