import { BSON, Double, Int32, Long } from 'mongodb'
import type { Document } from 'mongodb'
import { DELETE_MANY, DELETE_ONE, INSERT, REPLACE_ONE, type WriteBody, type WriteOp } from '../write/write-op.js'
import { overlaps } from '../write/paths.js'
import { targetOfId } from '../write/target.js'
import { compareExact, hasUndefined, increment } from './bson-values.js'
import type { RemoteWrite } from './bus-message.js'
import type { Entry, EntryStore } from './entry-store.js'
import { disjoint, equalities, idTargetOf, intersects, matches, updatedRoots } from './filter-facts.js'

/** Decoding for patches: every number keeps its BSON type (int32, int64, double). */
const EXACT = { promoteValues: false, promoteLongs: false } as const

/**
 * What a queued write does to cached answers (read-your-writes). A write patches a cached
 * document only when it targets exactly that document (`{ _id: value }`) and its update can
 * be applied exactly as the server would ($set, $unset, $inc, $setOnInsert on plain paths, or
 * a replacement); otherwise every entry it may affect is dropped:
 * - a write by `_id`: the entries holding that document, and those whose projection hides
 *   their document's `_id`;
 * - a write by decidable equalities: the entries whose document may match (a per-field index
 *   finds them without decoding the others);
 * - any other filter, or a write with a collation (the cache compares strings by their
 *   bytes): every entry of the collection;
 * - cached "not found" answers: an insert that may match, an upsert or replacement, or an
 *   update of a field the cached filter tests.
 */
export class WriteEffects {
  invalidations = 0
  patches = 0

  constructor (readonly store: EntryStore) {}

  /** Never throws: an unexpected failure drops the collection's entries instead. */
  apply (name: string, op: WriteOp): void {
    if (!this.store.has(name)) return
    try {
      this.#apply(name, op)
    } catch {
      this.invalidateAll(name)
    }
  }

  /** Drops every entry of a collection (a failed write may have been patched into them). */
  invalidateAll (name: string): void {
    for (const e of this.store.inCollection(name)) this.#invalidate(e)
  }

  /**
   * Another instance's acknowledged batch (bus-message.ts says what it carries): drops every
   * entry it may have changed — never patches (the update itself is not sent). Never throws:
   * an unexpected failure drops the collection's entries instead.
   */
  applyRemote (name: string, write: RemoteWrite): void {
    if (!this.store.has(name)) return
    try {
      this.#applyRemote(name, write)
    } catch {
      this.invalidateAll(name)
    }
  }

  #applyRemote (name: string, write: RemoteWrite): void {
    if (write.all) {
      this.invalidateAll(name)
      return
    }
    const drop = (entries: readonly Entry[]): void => { for (const e of entries) this.#invalidate(e) }
    for (const id of write.ids) {
      const target = targetOfId(id)
      drop(this.store.withId(name, target))
      drop(this.store.byFilterId(name, target))
    }
    // answers that do not show their document's _id may hold one of these documents
    if (write.ids.length > 0) drop(this.store.unknownIds(name))
    if (write.filters.length > 0) {
      // a projection may hide the fields a filter tests: such entries cannot be ruled out
      for (const e of this.store.projected(name)) this.#invalidate(e)
      for (const filter of write.filters) {
        const eq = equalities(filter)
        if (eq === undefined) { this.invalidateAll(name); return }
        for (const e of this.store.withField(name, eq[0] as [string, unknown])) {
          if (e.bytes !== null && matches(filter, BSON.deserialize(e.bytes, EXACT)) !== false) this.#invalidate(e)
        }
      }
    }
    for (const hash of write.hashes) drop(this.store.byValueHash(name, hash))
    if (write.anyField) drop(this.store.byFilterField(name))
    else for (const field of write.fields) drop(this.store.byFilterField(name, field))
  }

  #invalidate (entry: Entry): void {
    this.invalidations++
    this.store.remove(entry)
  }

  #apply (name: string, op: WriteOp): void {
    if (op.kind === INSERT) {
      const doc = op.body.document as Document
      for (const e of this.store.negatives(name)) if (matches(e.filter, doc) !== false) this.#invalidate(e)
      this.#dropCompetitors(name, doc, undefined)
      return
    }
    const body = op.body
    if (body.collation !== undefined) {
      // its filter compares strings by the collation, the cache by bytes: it may touch anything
      this.invalidateAll(name)
      return
    }
    const id = idTargetOf(body.filter)
    if (op.kind !== DELETE_ONE && op.kind !== DELETE_MANY) this.#dropRivalsOf(name, body, op.kind === REPLACE_ONE, id)
    if (id !== undefined) {
      // the entries holding the document, reads by its _id whatever their projection, and
      // answers whose projection left out (or computed) _id: they may hold it too
      const holding = new Set([...this.store.withId(name, id), ...this.store.byFilterId(name, id), ...this.store.unknownIds(name)])
      for (const e of holding) this.#patch(e, op, body)
    } else {
      const eq = equalities(body.filter)
      const candidates = eq === undefined
        ? this.store.inCollection(name)
        // a projection may hide the field the filter tests: projected entries are candidates too
        : new Set([...this.store.withField(name, eq[0] as [string, unknown]), ...this.store.projected(name)])
      // not unique: the server changes some matching document, maybe not the cached one
      for (const e of candidates) {
        if (e.bytes === null) continue
        if (e.projected || matches(body.filter, BSON.deserialize(e.bytes, EXACT)) !== false) this.#invalidate(e)
      }
    }
    this.#applyToNegatives(name, op, body)
  }

  /**
   * Another document may come to match a cached filter and be the server's answer instead
   * (the server picks among several matches by its own order). Drops the entries, other than
   * the one holding the written document itself, whose filter a write may make another
   * document match: by the value a `$set` gives a field, by the field for any other change.
   */
  #dropRivalsOf (name: string, body: WriteBody, replace: boolean, writtenId: string | undefined): void {
    const update = body.update
    if (replace || update === undefined || Array.isArray(update)) {
      for (const e of this.store.byFilterField(name)) if (e.idTarget !== writtenId || writtenId === undefined) this.#invalidate(e)
      return
    }
    const drop = (entries: readonly Entry[]): void => {
      for (const e of entries) if (e.idTarget !== writtenId || writtenId === undefined) this.#invalidate(e)
    }
    // an upsert may insert a document made of its filter's equalities and its $set fields
    if (body.upsert === true) this.#dropCompetitors(name, body.filter, writtenId)
    for (const operator in update) {
      const fields = update[operator] as Document
      for (const path in fields) {
        const root = path.split('.')[0] as string
        if (operator === '$unset') continue // a missing field equals no scalar: it makes nothing match
        if ((operator === '$set' || operator === '$setOnInsert') && root === path) drop(this.store.byFilterValue(name, root, fields[path]))
        else drop(this.store.byFilterField(name, root))
        if (operator === '$rename' && typeof fields[path] === 'string') drop(this.store.byFilterField(name, (fields[path]).split('.')[0]))
      }
    }
  }

  /** A new document `doc` (an insert, an upsert's) may match cached filters: drop those entries. */
  #dropCompetitors (name: string, doc: Document, writtenId: string | undefined): void {
    for (const field in doc) {
      for (const e of this.store.byFilterValue(name, field, doc[field])) {
        if ((e.idTarget !== writtenId || writtenId === undefined) && matches(e.filter, doc) !== false) this.#invalidate(e)
      }
    }
  }

  #applyToNegatives (name: string, op: WriteOp, body: WriteBody): void {
    if (op.kind === DELETE_ONE || op.kind === DELETE_MANY) return
    const roots = updatedRoots(body.update)
    const mayCreate = body.upsert === true || op.kind === REPLACE_ONE
    for (const e of this.store.negatives(name)) {
      if ((mayCreate && !disjoint(body.filter, e.filter)) || roots === null || intersects(roots, e.fields)) this.#invalidate(e)
    }
  }

  #patch (e: Entry, op: WriteOp, body: WriteBody): void {
    if (e.bytes === null) return
    const doc = BSON.deserialize(e.bytes, EXACT)
    let next: Document | null = null
    if (hasUndefined(op.kind === REPLACE_ONE ? body.replacement : body.update)) {
      // the driver sends undefined as null, or leaves the field out (ignoreUndefined): not patched
    } else if (!e.projected && op.kind === REPLACE_ONE && body.replacement !== undefined) {
      // the server keeps the document's _id, first
      const { _id: ignored, ...rest } = body.replacement
      next = { _id: doc._id as unknown, ...rest }
    } else if (!e.projected && op.kind !== DELETE_ONE && op.kind !== DELETE_MANY && applyUpdate(doc, body.update)) {
      next = doc
    }
    if (next === null || matches(e.filter, next) !== true) {
      this.#invalidate(e)
      return
    }
    this.patches++
    this.store.replace(e, BSON.serialize(next), next)
  }
}

/**
 * Applies $set / $unset / $inc / $max / $min ($setOnInsert: no effect) as the server would;
 * false when it cannot. MongoDB ≥ 5.0 applies one update's paths in the order of their names,
 * part by part, whatever their operators (so new fields are created in that order), but
 * numeric names in numeric order: with more than one path, a name that starts with a digit
 * or is not ASCII (whose order is not modelled here) is not patched, nor are paths whose order
 * part by part differs from their order as whole strings (`a.x`, `a-b`). write/coalesce.ts
 * merges by the same order.
 */
function applyUpdate (doc: Document, update: Document | Document[] | undefined): boolean {
  if (update === undefined || Array.isArray(update)) return false
  const steps: Array<[op: string, path: string, value: unknown]> = []
  const paths: string[] = []
  for (const op in update) {
    if (op !== '$set' && op !== '$unset' && op !== '$inc' && op !== '$max' && op !== '$min' && op !== '$setOnInsert') return false
    const fields = update[op] as Document
    for (const path in fields) {
      if (!plainPath(path)) return false
      paths.push(path)
      // $setOnInsert: the document exists, no effect (its paths still conflict with others)
      if (op !== '$setOnInsert') steps.push([op, path, fields[path]])
    }
  }
  if (paths.length > 1) {
    for (const path of paths) if (!ordered(path)) return false
    paths.sort(comparePaths)
    for (let i = 1; i < paths.length; i++) {
      const a = paths[i - 1] as string
      const b = paths[i] as string
      // two operators on one path, or `a` and `a.b`: the server refuses the update
      if (overlaps(a, b)) return false
      // `a.x` and `a-b`: whole names sort the other way round (FerretDB's order); not decided
      if (a > b) return false
    }
    steps.sort((a, b) => comparePaths(a[1], b[1]))
  }
  for (const [op, path, value] of steps) if (!applyPath(doc, op, path, value)) return false
  return true
}

/** A path of plain field names: none empty, none a `$` operator (positional `a.$`, `a.$[]`…). */
function plainPath (path: string): boolean {
  for (const part of path.split('.')) if (part === '' || part.charCodeAt(0) === 36) return false
  return true
}

/** Whether comparePaths gives the server's order for this path: no part starts with a digit, every character is ASCII. */
function ordered (path: string): boolean {
  for (let i = 0; i < path.length; i++) {
    const c = path.charCodeAt(i)
    if (c > 0x7f || (c >= 48 && c <= 57 && (i === 0 || path.charCodeAt(i - 1) === 46))) return false
  }
  return true
}

/** The server's order of two update paths: name by name, by bytes (ASCII names: see ordered). */
function comparePaths (a: string, b: string): number {
  const x = a.split('.')
  const y = b.split('.')
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const p = x[i] as string
    const q = y[i] as string
    if (p !== q) return p < q ? -1 : 1
  }
  return x.length - y.length
}

function isDocument (v: unknown): v is Document {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Date) && (v as { _bsontype?: unknown })._bsontype === undefined
}

/** A field of a decoded document: own properties only (`constructor`, `toString` are not fields). */
function own (node: Document, name: string): unknown {
  return Object.hasOwn(node, name) ? node[name] : undefined
}

function applyPath (doc: Document, op: string, path: string, value: unknown): boolean {
  const parts = path.split('.')
  // `node.__proto__ = v` would set a prototype, not the field the server writes
  if (parts.includes('__proto__')) return false
  let node: Document = doc
  for (let i = 0; i < parts.length - 1; i++) {
    const p = parts[i] as string
    const next: unknown = own(node, p)
    if (next === undefined) {
      if (op === '$unset') return true // nothing to unset
      node = node[p] = {}
      continue
    }
    if (!isDocument(next)) return false // arrays, scalars: the server's rules there are not modelled
    node = next
  }
  const leaf = parts[parts.length - 1] as string
  if (op === '$set') {
    node[leaf] = value
  } else if (op === '$unset') {
    delete node[leaf]
  } else if (op === '$max' || op === '$min') {
    const current: unknown = own(node, leaf)
    if (current === undefined) {
      node[leaf] = value
    } else {
      const order = compareExact(current, value)
      if (order === undefined) return false
      if (op === '$max' ? order < 0 : order > 0) node[leaf] = value
    }
  } else {
    const sum = increment(own(node, leaf), value)
    if (sum === undefined) return false
    node[leaf] = sum.kind === 'int' ? new Int32(Number(sum.value)) : sum.kind === 'long' ? Long.fromBigInt(BigInt(sum.value)) : new Double(Number(sum.value))
  }
  return true
}
