import type { Document } from 'mongodb'
import type { Filter, Matcher } from './filter-facts.js'
import { fieldsOf } from './filter-facts.js'
import { targetOfId } from '../write/target.js'

/** One cached findOne answer, stored as BSON (decoded per hit: callers may mutate what they get). */
export interface Entry {
  key: string
  /** collection name */
  name: string
  filter: Filter
  test: Matcher
  /** top-level fields the filter mentions */
  fields: Set<string>
  projected: boolean
  /** the document's BSON, or null for a cached "not found" */
  bytes: Uint8Array | null
  /** `name\0target-of-_id` when the cached document has an _id */
  idKey: string | undefined
  expires: number
}

export interface StoreLimits { maxEntries: number, maxBytes: number }

/**
 * The cached entries: LRU by entries and bytes (a Map's insertion order is the LRU order),
 * indexed by collection, by document `_id` and, for cached nulls, by collection.
 */
export class EntryStore {
  readonly #entries = new Map<string, Entry>()
  readonly #byCollection = new Map<string, Set<Entry>>()
  readonly #byId = new Map<string, Set<Entry>>()
  readonly #negatives = new Map<string, Set<Entry>>()
  #bytes = 0

  constructor (readonly limits: StoreLimits) {}

  get size (): number { return this.#entries.size }
  get bytes (): number { return this.#bytes }

  /** The entry for `key` if fresh (and marks it recently used); an expired one is removed. */
  get (key: string, now: number): Entry | undefined {
    const entry = this.#entries.get(key)
    if (entry === undefined) return undefined
    if (entry.expires <= now) {
      this.remove(entry)
      return undefined
    }
    this.#entries.delete(key)
    this.#entries.set(key, entry)
    return entry
  }

  put (key: string, name: string, filter: Filter, test: Matcher, projected: boolean, bytes: Uint8Array | null,
    doc: Document | null, ttlMs: number): void {
    const idKey = doc !== null && doc._id !== undefined ? name + '\0' + targetOfId(doc._id) : undefined
    const entry: Entry = { key, name, filter, test, fields: fieldsOf(filter), projected, bytes, idKey, expires: Date.now() + ttlMs }
    const old = this.#entries.get(key)
    if (old !== undefined) this.remove(old)
    this.#entries.set(key, entry)
    this.#bytes += bytes?.byteLength ?? 0
    addTo(this.#byCollection, name, entry)
    if (bytes === null) addTo(this.#negatives, name, entry)
    if (idKey !== undefined) addTo(this.#byId, idKey, entry)
    this.#evict()
  }

  /** Replaces an entry's document (a patch). */
  replaceBytes (entry: Entry, bytes: Uint8Array): void {
    this.#bytes += bytes.byteLength - (entry.bytes?.byteLength ?? 0)
    entry.bytes = bytes
  }

  #evict (): void {
    while (this.#entries.size > this.limits.maxEntries || this.#bytes > this.limits.maxBytes) {
      const oldest = this.#entries.values().next().value
      if (oldest === undefined) break
      this.remove(oldest)
    }
  }

  remove (entry: Entry): void {
    if (this.#entries.get(entry.key) !== entry) return
    this.#entries.delete(entry.key)
    this.#bytes -= entry.bytes?.byteLength ?? 0
    this.#byCollection.get(entry.name)?.delete(entry)
    if (entry.bytes === null) this.#negatives.get(entry.name)?.delete(entry)
    if (entry.idKey !== undefined) {
      const ids = this.#byId.get(entry.idKey)
      ids?.delete(entry)
      if (ids?.size === 0) this.#byId.delete(entry.idKey)
    }
  }

  /** Every entry of a collection (a live set: copy it before removing while iterating). */
  inCollection (name: string): Set<Entry> | undefined { return this.#byCollection.get(name) }
  /** Entries holding the document with this `_id` target. */
  withId (name: string, target: string): Set<Entry> | undefined { return this.#byId.get(name + '\0' + target) }
  /** Cached "not found" answers of a collection. */
  negatives (name: string): Set<Entry> | undefined { return this.#negatives.get(name) }

  clear (): void {
    this.#entries.clear()
    this.#byCollection.clear()
    this.#byId.clear()
    this.#negatives.clear()
    this.#bytes = 0
  }
}

function addTo<K> (index: Map<K, Set<Entry>>, key: K, entry: Entry): void {
  let set = index.get(key)
  if (set === undefined) index.set(key, set = new Set())
  set.add(entry)
}
