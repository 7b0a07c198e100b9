import { BSON } from 'mongodb'
import type { Collection, Document, FindOptions } from 'mongodb'
import siftImport from 'sift'
import { InvalidWriteError, describe } from './errors.js'
import { targetOf, targetOfId } from './target.js'
import { INSERT, REPLACE_ONE, DELETE_ONE, DELETE_MANY, bodyOf, type WriteBody, type WriteOp } from './write-op.js'

/**
 * Read cache for hot `findOne`s (login lookups): TTL + LRU (entries and bytes),
 * negative results cached with their own TTL, single-flight per key.
 *
 * Read-your-writes, per process: every write through the buffer is matched, when it is
 * queued, against the cached entries of its collection (by `_id` in O(1) when the write
 * targets one `_id`, by scanning that collection's entries otherwise):
 * - a cached document the write's filter matches is patched in place when the update is
 *   plain $set / $unset / $inc (or a replacement), else dropped;
 * - a cached `null` that an insert, an upsert or a change to a filtered field could turn
 *   into a document is dropped;
 * - a miss waits for pending writes that may touch its filter to land before it reads,
 *   and a read that raced a write is returned to its callers but not cached.
 * If a non-insert write then fails, the collection's entries are dropped (its patch may
 * show a write that did not happen). Other processes' writes are seen after at most ttlMs.
 * Cached documents are stored as BSON and decoded per hit, so callers may mutate what
 * they get without corrupting the cache.
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

interface Entry {
  key: string
  name: string
  filter: Document
  test: (doc: unknown) => boolean
  fields: Set<string>
  projected: boolean
  bytes: Uint8Array | null
  idKey: string | undefined
  expires: number
  ttlMs: number
}

interface Flight {
  key: string
  name: string
  projected: boolean
  /** writes pending when the read started or noted while it runs: they may race it */
  writes: WriteOp[]
  promise: Promise<Uint8Array | null>
}

type Filter = Document

// sift is CommonJS: at run time its default import is the function its types call `default`
const sift = siftImport as unknown as typeof siftImport.default

function writeDoc (op: WriteOp): Document {
  return bodyOf(op).document as Document
}

/** All field names a filter mentions, at any depth of $and/$or/$nor. */
function fieldsOf (filter: Filter, out: Set<string> = new Set()): Set<string> {
  for (const k in filter) {
    if (k === '$and' || k === '$or' || k === '$nor') {
      const list: unknown = filter[k]
      if (Array.isArray(list)) for (const f of list) if (f !== null && typeof f === 'object') fieldsOf(f as Filter, out)
    } else if (k.charCodeAt(0) !== 36) out.add(k.split('.')[0] as string)
    else out.add('$') // $where, $expr...: anything may matter
  }
  return out
}

function updatedRoots (update: Document | Document[] | undefined): Set<string> | null {
  if (update === undefined || Array.isArray(update)) return null // pipeline: anything may change
  const roots = new Set<string>()
  for (const op in update) for (const path in update[op]) roots.add(path.split('.')[0] as string)
  return roots
}

function intersects (a: Set<string>, b: Set<string>): boolean {
  if (a.has('$') || b.has('$')) return true
  for (const x of a) if (b.has(x)) return true
  return false
}

/**
 * Two filters that pin `_id` to different plain values cannot select the same document.
 * Only `_id`: any other field may hold an array, and `{tags: 'a'}` / `{tags: 'b'}` can
 * both match `{tags: ['a', 'b']}`.
 */
function disjoint (a: Filter, b: Filter): boolean {
  if (!('_id' in a) || !('_id' in b)) return false
  const va: unknown = a._id
  const vb: unknown = b._id
  if (isOperatorObject(va) || isOperatorObject(vb)) return false
  return targetOf({ _id: va }) !== targetOf({ _id: vb })
}

/** sift, but an operator it cannot evaluate ($expr, $text, $near…) answers "maybe". */
function matches (filter: Filter, doc: unknown): boolean {
  try {
    return sift(filter)(doc)
  } catch {
    return true
  }
}

function isOperatorObject (v: unknown): boolean {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return false
  for (const k in v) return k.charCodeAt(0) === 36
  return false
}

/** Applies $set / $unset / $inc to a plain document; false when it cannot predict the result. */
function applyUpdate (doc: Document, update: Document | Document[] | undefined): boolean {
  if (update === undefined || Array.isArray(update)) return false
  for (const op in update) {
    if (op !== '$set' && op !== '$unset' && op !== '$inc' && op !== '$setOnInsert') return false
    const fields = update[op] as Document
    for (const path in fields) {
      if (op === '$setOnInsert') continue // the document exists: no effect
      const parts = path.split('.')
      let node: Document = doc
      for (let i = 0; i < parts.length - 1; i++) {
        const p = parts[i] as string
        let next: unknown = node[p]
        if (next === undefined || next === null) {
          if (op === '$unset') { node = null as unknown as Document; break } // nothing to unset
          next = node[p] = {}
        }
        if (typeof next !== 'object' || Array.isArray(next) || (next as { _bsontype?: unknown })._bsontype !== undefined) return false
        node = next as Document
      }
      if (node === null) continue
      const leaf = parts[parts.length - 1] as string
      if (op === '$set') node[leaf] = fields[path]
      else if (op === '$unset') delete node[leaf]
      else {
        const by: unknown = fields[path]
        const cur: unknown = node[leaf] ?? 0
        if (typeof by !== 'number' || typeof cur !== 'number') return false
        node[leaf] = cur + by
      }
    }
  }
  return true
}

export class ReadCache {
  readonly #o: ResolvedCacheOptions
  #kick: () => void = () => {}
  readonly #entries = new Map<string, Entry>() // insertion order = LRU order
  readonly #byCollection = new Map<string, Set<Entry>>()
  readonly #byId = new Map<string, Set<Entry>>()
  readonly #negatives = new Map<string, Set<Entry>>()
  readonly #pending = new Map<string, Set<WriteOp>>()
  readonly #flights = new Map<string, Flight>()
  readonly #flightsByName = new Map<string, Set<Flight>>()
  /** callbacks waiting for a pending write to settle (a miss that must not read before it) */
  readonly #writeWaiters = new Map<WriteOp, Array<() => void>>()
  #bytes = 0
  #stats = { hits: 0, misses: 0, dedupes: 0, invalidations: 0, patches: 0 }

  constructor (options: ResolvedCacheOptions) {
    this.#o = options
  }

  /** The buffer hands in a way to send what is queued now (a miss waiting for writes). */
  bindKick (kick: () => void): void { this.#kick = kick }

  stats (): ReadCacheStats {
    return { ...this.#stats, entries: this.#entries.size, bytes: this.#bytes }
  }

  clear (): void {
    this.#entries.clear()
    this.#byCollection.clear()
    this.#byId.clear()
    this.#negatives.clear()
    this.#bytes = 0
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
    let test: Entry['test']
    try {
      test = sift(f) // compiled once: the entry keeps it to match later writes
    } catch {
      return collection.findOne(f, options) // an operator the matcher cannot follow: never cached
    }
    const projection = options?.projection
    // length-prefixed parts: no filter value can forge another filter's (or projection's) key
    const target = targetOf(f)
    const proj = projection === undefined ? '' : targetOf(projection)
    const key = `${name.length}:${name}${target.length}:${target}${proj}`
    const entry = this.#entries.get(key)
    if (entry !== undefined) {
      if (entry.expires > Date.now()) {
        this.#stats.hits++
        this.#entries.delete(key)
        this.#entries.set(key, entry)
        return entry.bytes === null ? null : BSON.deserialize(entry.bytes)
      }
      this.#remove(entry)
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
      if (projected && op.kind !== INSERT && !disjoint(bodyOf(op).filter, filter)) return true
      if (this.#affects(op, doc, filter, fields)) return true
    }
    return false
  }

  /** Resolves once every given pending write has settled; sends the queue at once. */
  #settled (ops: WriteOp[]): Promise<unknown> {
    this.#kick()
    return Promise.all(ops.map(op => new Promise<void>(resolve => {
      let list = this.#writeWaiters.get(op)
      if (list === undefined) this.#writeWaiters.set(op, list = [])
      list.push(resolve)
    })))
  }

  async #load (collection: Collection, name: string, filter: Filter, test: Entry['test'], options: FindOptions | undefined,
    flight: Flight): Promise<Uint8Array | null> {
    try {
      // read-your-writes on a miss: the pending writes that may touch this filter land first
      const before = this.#pendingAffecting(name, filter)
      if (before.length > 0) await this.#settled(before)
      const doc = await collection.findOne(filter, options)
      const bytes = doc === null ? null : BSON.serialize(doc)
      // cache only if no write pending at the start or noted since could have changed the answer
      if (!this.#raced(flight.writes, doc, filter, flight.projected)) {
        this.#store(flight.key, name, filter, test, options?.projection !== undefined, bytes, doc)
      }
      return bytes
    } finally {
      if (this.#flights.get(flight.key) === flight) this.#flights.delete(flight.key)
      this.#flightsByName.get(name)?.delete(flight)
    }
  }

  #store (key: string, name: string, filter: Filter, test: Entry['test'], projected: boolean, bytes: Uint8Array | null,
    doc: Document | null): void {
    const ttlMs = bytes === null ? this.#o.negativeTtlMs : this.#o.ttlMs
    if (ttlMs === 0) return
    const idKey = doc !== null && doc._id !== undefined ? name + '\0' + targetOfId(doc._id) : undefined
    const entry: Entry = {
      key, name, filter, test, fields: fieldsOf(filter), projected, bytes, idKey, expires: Date.now() + ttlMs, ttlMs,
    }
    const old = this.#entries.get(key)
    if (old !== undefined) this.#remove(old)
    this.#entries.set(key, entry)
    this.#bytes += bytes?.byteLength ?? 0
    let set = this.#byCollection.get(name)
    if (set === undefined) this.#byCollection.set(name, set = new Set())
    set.add(entry)
    if (bytes === null) {
      let neg = this.#negatives.get(name)
      if (neg === undefined) this.#negatives.set(name, neg = new Set())
      neg.add(entry)
    }
    if (idKey !== undefined) {
      let ids = this.#byId.get(idKey)
      if (ids === undefined) this.#byId.set(idKey, ids = new Set())
      ids.add(entry)
    }
    while (this.#entries.size > this.#o.maxEntries || this.#bytes > this.#o.maxBytes) {
      const oldest = this.#entries.values().next().value as Entry | undefined
      if (oldest === undefined) break
      this.#remove(oldest)
    }
  }

  #remove (entry: Entry): void {
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

  #invalidate (entry: Entry): void {
    this.#stats.invalidations++
    this.#remove(entry)
  }

  /** Whether `op` could change what findOne(filter) returns, given what it returned (`doc`). */
  #affects (op: WriteOp, doc: Document | null, filter: Filter, filterFields: Set<string>): boolean {
    if (op.kind === INSERT) return doc === null && matches(filter, writeDoc(op))
    const body = bodyOf(op)
    if (doc !== null) return matches(body.filter, doc)
    if (op.kind === DELETE_ONE || op.kind === DELETE_MANY) return false
    if (body.upsert === true || op.kind === REPLACE_ONE) return !disjoint(body.filter, filter) || intersects(updatedRoots(body.update) ?? new Set(['$']), filterFields)
    const roots = updatedRoots(body.update)
    return roots === null || intersects(roots, filterFields)
  }

  #pendingAffecting (name: string, filter: Filter): WriteOp[] {
    const out: WriteOp[] = []
    const pending = this.#pending.get(name)
    if (pending === undefined || pending.size === 0) return out
    for (const op of pending) {
      if (op.kind === INSERT ? matches(filter, writeDoc(op)) : !disjoint(bodyOf(op).filter, filter)) out.push(op)
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
    const all = this.#byCollection.get(name)
    if (all === undefined || all.size === 0) return
    try {
      this.#applyWrite(name, op, all)
    } catch {
      // the matcher could not follow the write's filter: drop what it might have touched
      for (const e of [...all]) this.#invalidate(e)
    }
  }

  #applyWrite (name: string, op: WriteOp, all: Set<Entry>): void {
    const negatives = this.#negatives.get(name)
    if (op.kind === INSERT) {
      const doc = writeDoc(op)
      if (negatives !== undefined) for (const e of [...negatives]) if (e.test(doc)) this.#invalidate(e)
      return
    }
    const body = bodyOf(op)
    // a write by one _id can only touch entries holding that document, plus cached nulls
    const byId = op.target.charCodeAt(0) !== 123 /* '{': not a lone-_id target */
    const candidates = byId ? this.#byId.get(name + '\0' + op.target) : all
    if (candidates !== undefined) {
      const writeTest = sift(body.filter)
      for (const e of [...candidates]) {
        if (e.bytes === null || e.projected) continue
        const doc = BSON.deserialize(e.bytes)
        if (writeTest(doc)) this.#patch(e, op, doc, body)
      }
    }
    // a projected entry may lack the fields (even the _id) the write's filter tests: drop it
    // unless the two filters pin different _ids
    for (const e of [...all]) {
      if (e.projected && e.bytes !== null && !disjoint(body.filter, e.filter)) this.#invalidate(e)
    }
    if (op.kind === DELETE_ONE || op.kind === DELETE_MANY || negatives === undefined) return
    const roots = updatedRoots(body.update)
    for (const e of [...negatives]) {
      const mayCreate = (body.upsert === true || op.kind === REPLACE_ONE) && !disjoint(body.filter, e.filter)
      if (mayCreate || roots === null || intersects(roots, e.fields)) this.#invalidate(e)
    }
  }

  #patch (e: Entry, op: WriteOp, doc: Document, body: WriteBody): void {
    let next: Document | null = null
    if (!e.projected) {
      if (op.kind === REPLACE_ONE && body.replacement !== undefined) {
        next = { ...body.replacement, _id: doc._id }
      } else if (op.kind !== DELETE_ONE && op.kind !== DELETE_MANY && applyUpdate(doc, body.update)) {
        next = doc
      }
    }
    if (next === null || !e.test(next)) { this.#invalidate(e); return }
    this.#stats.patches++
    const bytes = BSON.serialize(next)
    this.#bytes += bytes.byteLength - (e.bytes?.byteLength ?? 0)
    e.bytes = bytes
  }

  /** A write settled. A failed one (other than an insert) may have been patched into entries: drop them. */
  settleWrite (name: string, op: WriteOp, ok: boolean): void {
    this.#pending.get(name)?.delete(op)
    const waiters = this.#writeWaiters.get(op)
    if (waiters !== undefined) {
      this.#writeWaiters.delete(op)
      for (const resolve of waiters) resolve()
    }
    if (ok || op.kind === INSERT) return
    const all = this.#byCollection.get(name)
    if (all !== undefined) for (const e of [...all]) this.#invalidate(e)
  }
}
