import type { Document } from 'mongodb'
import { BSON } from 'mongodb'
import { realClock, type Clock } from '../clock.js'
import type { Filter } from './filter-facts.js'
import { answerOf, type Answer } from './footprint.js'
import { ALL, answerKeys, docFieldKey, docFieldKeys, idIndexKey } from './index-keys.js'
import { KeyIndex } from './key-index.js'
import { keyOf, UNKNOWN } from './value-keys.js'

/** One cached findOne answer: the server's BSON bytes, decoded per hit (callers may mutate what they get). */
export interface Entry {
  key: string
  /** collection name */
  name: string
  filter: Filter
  /** target of the `_id` the filter pins alone, if it does */
  filterId: string | undefined
  projected: boolean
  /** the document's BSON, or null for a cached "not found" */
  bytes: Uint8Array | null
  /**
   * target of the document's `_id` when the answer shows it (or the filter pins it);
   * undefined: a projection left it out or computed it, a write by `_id` cannot tell
   * whether the entry holds that document
   */
  idKey: string | undefined
  /** keys of the indexes this entry is listed under, but the per-field ones */
  indexKeys: string[]
  /** per top-level field of its (unprojected) document: the per-field index keys it is listed under */
  fieldKeys: Map<string, string[]> | undefined
  expires: number
  /** clock time when the read that made it was sent: how old its answer may be */
  readAt: number
}

export interface StoreLimits { maxEntries: number, maxBytes: number }

/** Decoding for decisions: every number keeps its BSON type. */
const EXACT = { promoteValues: false, promoteLongs: false } as const

/**
 * The cached entries: LRU by entries and bytes (a Map's insertion order is the LRU order),
 * both limits held at all times (patches included). Each entry is listed under its answer's
 * index keys (footprint.ts#answerKeys, per collection): a write looks up its footprint's keys
 * and visits only the entries it may affect — never every entry, nor every cached "not found".
 * Lookups return copies: callers may remove while iterating.
 */
export class EntryStore {
  readonly #entries = new Map<string, Entry>()
  readonly #index = new KeyIndex<Entry>()
  #bytes = 0
  evictions = 0

  constructor (readonly limits: StoreLimits, readonly clock: Clock = realClock) {}

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
      key, name, filter, filterId: undefined, projected, bytes, idKey: undefined, indexKeys: [], fieldKeys: undefined, expires: this.clock.now() + ttlMs, readAt,
    }
    const old = this.#entries.get(key)
    if (old !== undefined) this.remove(old)
    this.#entries.set(key, entry)
    this.#bytes += bytes?.byteLength ?? 0
    this.#indexEntry(entry, answerOf(filter, doc, projected, idKnown), doc)
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
      this.#indexEntry(entry, answerOf(entry.filter, doc, entry.projected, entry.idKey !== undefined), doc)
    } else if (!entry.projected) {
      for (const field of roots) {
        const old = entry.fieldKeys?.get(field)
        if (old !== undefined) this.#index.unlist(entry.name, entry, old)
        entry.fieldKeys?.delete(field)
      }
      docFieldKeys(doc, (field, keys) => { if (roots.has(field)) this.#listField(entry, field, keys) })
    }
    this.#evict()
  }

  remove (entry: Entry): void {
    if (this.#entries.get(entry.key) !== entry) return
    this.#entries.delete(entry.key)
    this.#bytes -= entry.bytes?.byteLength ?? 0
    this.#unindex(entry)
  }

  has (name: string): boolean { return this.#index.has(name, ALL) }
  /** Whether `entry` is still the one stored under its key. */
  holds (entry: Entry): boolean { return this.#entries.get(entry.key) === entry }
  /** Every entry of a collection. */
  inCollection (name: string): readonly Entry[] { return this.#index.under(name, [ALL]) }
  /** Entries holding the document whose `_id` has this target. */
  withId (name: string, idKey: string): readonly Entry[] { return this.#index.under(name, [idIndexKey(idKey)]) }
  /** Entries whose (unprojected) document may hold `value` in top-level `field` (equal, in an array, or of a type not decided). */
  withField (name: string, [field, value]: [string, unknown]): readonly Entry[] {
    return this.candidates(name, [docFieldKey(field, keyOf(value)), docFieldKey(field, UNKNOWN)])
  }

  /** The entries listed under any of these keys (footprint.ts#footprintKeys), each once: a copy. */
  candidates (name: string, keys: readonly string[]): Entry[] {
    return this.#index.under(name, keys)
  }

  /** An entry as footprint.ts#affects sees it (its document decoded only if asked). */
  answer (e: Entry): Answer {
    let doc: Document | undefined
    return {
      filter: e.filter,
      filterId: e.filterId,
      found: e.bytes !== null,
      doc: () => (doc ??= BSON.deserialize(e.bytes as Uint8Array, EXACT)),
      projected: e.projected,
      idKey: e.idKey,
    }
  }

  clear (): void {
    this.#entries.clear()
    this.#index.clear()
    this.#bytes = 0
  }

  #evict (): void {
    while (this.#entries.size > this.limits.maxEntries || this.#bytes > this.limits.maxBytes) {
      const oldest = this.#entries.values().next().value
      if (oldest === undefined) break
      this.evictions++
      this.remove(oldest)
    }
  }

  #indexEntry (entry: Entry, a: Answer, doc: Document | null): void {
    entry.filterId = a.filterId
    entry.idKey = a.idKey
    entry.indexKeys = answerKeys(a)
    this.#index.list(entry.name, entry, entry.indexKeys)
    if (doc !== null && !entry.projected) docFieldKeys(doc, (field, keys) => { this.#listField(entry, field, keys) })
  }

  #listField (entry: Entry, field: string, keys: string[]): void {
    (entry.fieldKeys ??= new Map()).set(field, keys)
    this.#index.list(entry.name, entry, keys)
  }

  #unindex (entry: Entry): void {
    this.#index.unlist(entry.name, entry, entry.indexKeys)
    if (entry.fieldKeys !== undefined) for (const keys of entry.fieldKeys.values()) this.#index.unlist(entry.name, entry, keys)
    entry.indexKeys = []
    entry.fieldKeys = undefined
  }
}
