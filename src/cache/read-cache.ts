import { BSON } from 'mongodb'
import type { Collection, Document, FindOptions } from 'mongodb'
import { InvalidWriteError, describe } from '../errors.js'
import { targetOf } from '../write/target.js'
import { INSERT, type WriteOp } from '../write/write-op.js'
import { EntryStore } from './entry-store.js'
import { compile, disjoint, fieldsOf, matches, type Filter, type Matcher } from './filter-facts.js'
import { affects, WriteEffects } from './write-effects.js'

/**
 * Read cache for hot `findOne`s (login lookups): TTL + LRU (entries and bytes),
 * negative results cached with their own TTL, single-flight per key.
 *
 * Read-your-writes, per process: every write through the buffer is applied, when it is
 * queued, to the cached entries it may change (WriteEffects); a miss waits for pending
 * writes that may touch its filter to land before it reads, and a read that raced a write
 * is returned to its callers but not cached. If a non-insert write then fails, the
 * collection's entries are dropped (its patch may show a write that did not happen).
 * Other processes' writes are seen after at most ttlMs.
 */

export interface ReadCacheStats {
  hits: number
  misses: number
  dedupes: number
  invalidations: number
  patches: number
  entries: number
  bytes: number
}

export interface ResolvedCacheOptions { ttlMs: number, negativeTtlMs: number, maxEntries: number, maxBytes: number }

/** A read in progress (single-flight). */
interface Flight {
  key: string
  name: string
  projected: boolean
  /** writes pending when the read started or noted while it runs: they may race it */
  writes: WriteOp[]
  promise: Promise<Uint8Array | null>
}

export class ReadCache {
  readonly #options: ResolvedCacheOptions
  readonly #store: EntryStore
  readonly #effects: WriteEffects
  #sendNow: () => void = () => {}
  /** writes queued (or waiting for room) and not yet settled, by collection */
  readonly #pending = new Map<string, Set<WriteOp>>()
  readonly #flights = new Map<string, Flight>()
  readonly #flightsByName = new Map<string, Set<Flight>>()
  /** callbacks waiting for a pending write to settle (a miss that must not read before it) */
  readonly #writeWaiters = new Map<WriteOp, Array<() => void>>()
  #stats = { hits: 0, misses: 0, dedupes: 0 }

  constructor (options: ResolvedCacheOptions) {
    this.#options = options
    this.#store = new EntryStore(options)
    this.#effects = new WriteEffects(this.#store)
  }

  /** The buffer hands in a way to send what is queued now (a miss waiting for writes). */
  bindKick (sendNow: () => void): void { this.#sendNow = sendNow }

  stats (): ReadCacheStats {
    return {
      ...this.#stats,
      invalidations: this.#effects.invalidations,
      patches: this.#effects.patches,
      entries: this.#store.size,
      bytes: this.#store.bytes,
    }
  }

  clear (): void {
    this.#store.clear()
  }

  async findOne (collection: Collection, name: string, filter: unknown, options?: FindOptions): Promise<Document | null> {
    if (filter === null || typeof filter !== 'object' || Array.isArray(filter)) {
      throw new InvalidWriteError(`filter must be a plain object, got ${describe(filter)}`)
    }
    const f = filter as Filter
    // only filter + projection make the key: anything else (sort, skip, collation, hint…)
    // could pick another document, so such reads go straight to the driver
    if (options !== undefined) {
      for (const k in options) {
        if (k !== 'projection' && (options as Record<string, unknown>)[k] !== undefined) return collection.findOne(f, options)
      }
    }
    let test: Matcher
    try {
      test = compile(f) // compiled once: the entry keeps it to match later writes
    } catch {
      return collection.findOne(f, options) // an operator the matcher cannot follow: never cached
    }
    const projection = options?.projection
    // length-prefixed parts: no filter value can forge another filter's (or projection's) key
    const target = targetOf(f)
    const proj = projection === undefined ? '' : targetOf(projection)
    const key = `${name.length}:${name}${target.length}:${target}${proj}`
    const entry = this.#store.get(key, Date.now())
    if (entry !== undefined) {
      this.#stats.hits++
      return entry.bytes === null ? null : BSON.deserialize(entry.bytes)
    }
    const flight = this.#flights.get(key)
    if (flight !== undefined) {
      // Join the read in progress; take its answer only if it would be cached, i.e. no write
      // pending when it started or noted since (before or after we joined) could change it.
      const bytes = await flight.promise
      const doc = bytes === null ? null : BSON.deserialize(bytes)
      if (!this.#raced(flight.writes, doc, f, flight.projected)) {
        this.#stats.dedupes++
        return doc
      }
      return this.findOne(collection, name, f, options)
    }
    this.#stats.misses++
    const own: Flight = {
      key, name, projected: projection !== undefined, writes: [...(this.#pending.get(name) ?? [])], promise: null as unknown as Promise<Uint8Array | null>,
    }
    // registered before the load starts: its `finally` must find it to remove it
    this.#flights.set(key, own)
    let byName = this.#flightsByName.get(name)
    if (byName === undefined) this.#flightsByName.set(name, byName = new Set())
    byName.add(own)
    own.promise = this.#load(collection, name, f, test, options, own)
    const bytes = await own.promise
    return bytes === null ? null : BSON.deserialize(bytes)
  }

  #raced (writes: WriteOp[], doc: Document | null, filter: Filter, projected: boolean): boolean {
    if (writes.length === 0) return false
    const fields = fieldsOf(filter)
    for (const op of writes) {
      // a projected document may lack the fields a write's filter tests: any write that may
      // select it counts
      if (projected && op.kind !== INSERT && !disjoint(op.body.filter, filter)) return true
      if (affects(op, doc, filter, fields)) return true
    }
    return false
  }

  /** Resolves once every given pending write has settled; sends the queue at once. */
  #settled (ops: WriteOp[]): Promise<unknown> {
    this.#sendNow()
    return Promise.all(ops.map(op => new Promise<void>(resolve => {
      let list = this.#writeWaiters.get(op)
      if (list === undefined) this.#writeWaiters.set(op, list = [])
      list.push(resolve)
    })))
  }

  async #load (collection: Collection, name: string, filter: Filter, test: Matcher, options: FindOptions | undefined,
    flight: Flight): Promise<Uint8Array | null> {
    try {
      // read-your-writes on a miss: the pending writes that may touch this filter land first
      const before = this.#pendingAffecting(name, filter)
      if (before.length > 0) await this.#settled(before)
      const doc = await collection.findOne(filter, options)
      const bytes = doc === null ? null : BSON.serialize(doc)
      // cache only if no write pending at the start or noted since could have changed the answer
      if (!this.#raced(flight.writes, doc, filter, flight.projected)) {
        const ttlMs = bytes === null ? this.#options.negativeTtlMs : this.#options.ttlMs
        if (ttlMs > 0) this.#store.put(flight.key, name, filter, test, options?.projection !== undefined, bytes, doc, ttlMs)
      }
      return bytes
    } finally {
      if (this.#flights.get(flight.key) === flight) this.#flights.delete(flight.key)
      this.#flightsByName.get(name)?.delete(flight)
    }
  }

  #pendingAffecting (name: string, filter: Filter): WriteOp[] {
    const out: WriteOp[] = []
    const pending = this.#pending.get(name)
    if (pending === undefined || pending.size === 0) return out
    for (const op of pending) {
      if (op.kind === INSERT ? matches(filter, op.body.document) : !disjoint(op.body.filter, filter)) out.push(op)
    }
    return out
  }

  /** A write was queued: keep every cached answer it may change in step with it. Never throws. */
  noteWrite (name: string, op: WriteOp): void {
    let pending = this.#pending.get(name)
    if (pending === undefined) this.#pending.set(name, pending = new Set())
    pending.add(op)
    const flights = this.#flightsByName.get(name)
    if (flights !== undefined) for (const flight of flights) flight.writes.push(op)
    this.#effects.apply(name, op)
  }

  /** A write settled. A failed one (other than an insert) may have been patched into entries: drop them. */
  settleWrite (name: string, op: WriteOp, ok: boolean): void {
    this.#pending.get(name)?.delete(op)
    const waiters = this.#writeWaiters.get(op)
    if (waiters !== undefined) {
      this.#writeWaiters.delete(op)
      for (const resolve of waiters) resolve()
    }
    if (!ok && op.kind !== INSERT) this.#effects.invalidateAll(name)
  }
}
