import type { Document } from 'mongodb'
import { targetOfId } from '../write/target.js'
import { equalities, fieldsOf, idTargetOf, type Filter } from './filter-facts.js'
import { UNKNOWN, valueHash, valueKeys } from './value-keys.js'

/** One cached findOne answer: the server's BSON bytes, decoded per hit (callers may mutate what they get). */
export interface Entry {
  key: string
  /** collection name */
  name: string
  filter: Filter
  /** top-level fields the filter mentions */
  fields: Set<string>
  projected: boolean
  /**
   * the answer's `_id` is the document's own (false: a projection left it out or computed
   * it; a write by `_id` cannot tell whether it holds that document)
   */
  idKnown: boolean
  /** the document's BSON, or null for a cached "not found" */
  bytes: Uint8Array | null
  /** target of the document's _id, when the answer shows it (idKnown) */
  idTarget: string | undefined
  /** keys of the indexes this entry is listed under, but the per-field ones */
  indexKeys: string[]
  /** per top-level field of its document: the per-field index keys it is listed under */
  fieldKeys: Map<string, string[]>
  expires: number
  /** performance.now() when the read that made it was sent: how old its answer may be */
  readAt: number
}

export interface StoreLimits { maxEntries: number, maxBytes: number }

const EMPTY: readonly Entry[] = []

/**
 * The cached entries: LRU by entries and bytes (a Map's insertion order is the LRU order),
 * both limits held at all times (patches included). Indexed by collection, by document
 * `_id` (or as holding a document whose `_id` is not shown), by top-level field value (so a
 * write by `{ email }` finds the entries it may touch without decoding the others), and
 * cached "not found" answers by collection; for the cache
 * bus (write-effects.ts#applyRemote) also by the `_id` a filter pins and by the hashes of a
 * filter's equalities. Lookups return copies: callers may remove while iterating.
 */
export class EntryStore {
  readonly #entries = new Map<string, Entry>()
  readonly #index = new Map<string, Set<Entry>>()
  #bytes = 0
  evictions = 0

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

  put (key: string, name: string, filter: Filter, projected: boolean, bytes: Uint8Array | null, doc: Document | null, ttlMs: number, readAt: number, idKnown = !projected): void {
    const entry: Entry = {
      key, name, filter, fields: fieldsOf(filter), projected, idKnown, bytes, idTarget: undefined, indexKeys: [], fieldKeys: new Map(), expires: Date.now() + ttlMs, readAt,
    }
    const old = this.#entries.get(key)
    if (old !== undefined) this.remove(old)
    this.#entries.set(key, entry)
    this.#bytes += bytes?.byteLength ?? 0
    this.#indexEntry(entry, doc)
    this.#evict()
  }

  /**
   * Replaces an entry's document (a patch); the limits still hold after it. `roots`: the
   * top-level fields the patch may have changed (only their keys are redone), null for any.
   */
  replace (entry: Entry, bytes: Uint8Array, doc: Document, roots: ReadonlySet<string> | null = null): void {
    if (this.#entries.get(entry.key) !== entry) return
    this.#bytes += bytes.byteLength - (entry.bytes?.byteLength ?? 0)
    entry.bytes = bytes
    if (roots === null || roots.has('_id')) {
      this.#unindex(entry)
      this.#indexEntry(entry, doc)
    } else {
      for (const field of roots) {
        const old = entry.fieldKeys.get(field)
        if (old !== undefined) this.#drop(entry, old)
        entry.fieldKeys.delete(field)
        if (Object.hasOwn(doc, field)) this.#add(entry, entry.fieldKeys, field, doc[field])
      }
    }
    this.#evict()
  }

  remove (entry: Entry): void {
    if (this.#entries.get(entry.key) !== entry) return
    this.#entries.delete(entry.key)
    this.#bytes -= entry.bytes?.byteLength ?? 0
    this.#unindex(entry)
  }

  has (name: string): boolean { return this.#index.has(`c\0${name}`) }
  /** Whether `entry` is still the one stored under its key. */
  holds (entry: Entry): boolean { return this.#entries.get(entry.key) === entry }
  /** Every entry of a collection. */
  inCollection (name: string): readonly Entry[] { return this.#list(`c\0${name}`) }
  /** Entries holding the document whose `_id` has this target. */
  withId (name: string, idTarget: string): readonly Entry[] { return this.#list(`i\0${name}\0${idTarget}`) }
  /** Cached "not found" answers of a collection. */
  negatives (name: string): readonly Entry[] { return this.#list(`n\0${name}`) }
  /** Entries of reads by one `_id` (`{ _id: v }`, any projection, cached nulls included). */
  byFilterId (name: string, idTarget: string): readonly Entry[] { return this.#list(`l\0${name}\0${idTarget}`) }
  /** Entries whose filter (not a lone `_id`) has an equality `field: value` of this hash (value-keys.ts#valueHash). */
  byValueHash (name: string, hash: number): readonly Entry[] { return this.#list(`h\0${name}\0${hash}`) }
  /** Entries holding a document whose `_id` the answer does not show (a projection left it out or computed it). */
  unknownIds (name: string): readonly Entry[] { return this.#list(`u\0${name}`) }
  /** Entries of projected reads (they may lack the fields a write's filter tests). */
  projected (name: string): readonly Entry[] { return this.#list(`p\0${name}`) }
  /** Entries whose filter (not a lone `_id`) tests `field` for equality with `value` (the keys of a value: see valueKeys). */
  byFilterValue (name: string, field: string, value: unknown): readonly Entry[] {
    const out: Entry[] = []
    for (const key of valueKeys(value)) if (key !== UNKNOWN) out.push(...this.#list(`q\0${name}\0${field}\0${key}`))
    return out
  }

  /** Entries whose filter (not a lone `_id`) tests `field`; `field` undefined: every such entry. */
  byFilterField (name: string, field?: string): readonly Entry[] {
    return this.#list(field === undefined ? `qa\0${name}` : `qf\0${name}\0${field}`)
  }

  /** Entries whose document may hold `value` in top-level `field` (equal, in an array, or of a type not decided). */
  withField (name: string, [field, value]: [string, unknown]): readonly Entry[] {
    return [...this.#list(`f\0${name}\0${field}\0${targetOfId(value)}`), ...this.#list(`f\0${name}\0${field}\0${UNKNOWN}`)]
  }

  clear (): void {
    this.#entries.clear()
    this.#index.clear()
    this.#bytes = 0
  }

  #list (key: string): readonly Entry[] {
    const set = this.#index.get(key)
    return set === undefined ? EMPTY : [...set]
  }

  #evict (): void {
    while (this.#entries.size > this.limits.maxEntries || this.#bytes > this.limits.maxBytes) {
      const oldest = this.#entries.values().next().value
      if (oldest === undefined) break
      this.evictions++
      this.remove(oldest)
    }
  }

  #indexEntry (entry: Entry, doc: Document | null): void {
    const keys = entry.indexKeys = [`c\0${entry.name}`]
    const eq = equalities(entry.filter)
    const filterId = idTargetOf(entry.filter)
    if (filterId !== undefined) {
      keys.push(`l\0${entry.name}\0${filterId}`)
    } else if (eq !== undefined) {
      // a filter that other documents may come to match: findable by what a write changes
      keys.push(`qa\0${entry.name}`)
      for (const [field, value] of eq) {
        const valueKey = targetOfId(value)
        keys.push(`qf\0${entry.name}\0${field}`, `q\0${entry.name}\0${field}\0${valueKey}`, `h\0${entry.name}\0${valueHash(field, valueKey)}`)
      }
    }
    if (doc === null) {
      keys.push(`n\0${entry.name}`)
    } else {
      if (entry.projected) keys.push(`p\0${entry.name}`)
      if (entry.idKnown && doc._id !== undefined) {
        entry.idTarget = targetOfId(doc._id)
        keys.push(`i\0${entry.name}\0${entry.idTarget}`)
      } else {
        keys.push(`u\0${entry.name}`)
      }
    }
    this.#enlist(entry, keys)
    if (doc !== null) for (const field in doc) this.#add(entry, entry.fieldKeys, field, doc[field])
  }

  /** Lists `entry` under the per-field keys of `value` in `field`. */
  #add (entry: Entry, fieldKeys: Map<string, string[]>, field: string, value: unknown): void {
    const keys: string[] = []
    for (const valueKey of valueKeys(value)) keys.push(`f\0${entry.name}\0${field}\0${valueKey}`)
    fieldKeys.set(field, keys)
    this.#enlist(entry, keys)
  }

  #enlist (entry: Entry, keys: readonly string[]): void {
    for (const key of keys) {
      let set = this.#index.get(key)
      if (set === undefined) this.#index.set(key, set = new Set())
      set.add(entry)
    }
  }

  #drop (entry: Entry, keys: readonly string[]): void {
    for (const key of keys) {
      const set = this.#index.get(key)
      set?.delete(entry)
      if (set?.size === 0) this.#index.delete(key)
    }
  }

  #unindex (entry: Entry): void {
    this.#drop(entry, entry.indexKeys)
    for (const keys of entry.fieldKeys.values()) this.#drop(entry, keys)
    entry.indexKeys = []
    entry.fieldKeys.clear()
  }
}
