import { BSON } from 'mongodb'
import type { Document } from 'mongodb'
import { DELETE_MANY, DELETE_ONE, INSERT, REPLACE_ONE, type WriteBody, type WriteOp } from '../write/write-op.js'
import { targetOfId } from '../write/target.js'
import { applyUpdate } from './apply-update.js'
import { hasUndefined } from './bson-values.js'
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

  /** Per collection: entries patched by writes still pending here (ahead of the server). */
  readonly #patched = new Map<string, Set<Entry>>()

  constructor (readonly store: EntryStore) {}

  /** No write to the document `idTarget` is pending any more: its entries show what the server has. */
  caughtUp (name: string, idTarget: string): void {
    const patched = this.#patched.get(name)
    if (patched !== undefined) for (const e of this.store.withId(name, idTarget)) patched.delete(e)
  }

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
      this.#dropPatched(name)
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

  /**
   * A write found by another field than `_id` is matched against the server's documents, not
   * against entries patched by writes of ours still pending: those show values the server
   * may not have yet (and two writes of different targets have no order), so they go.
   */
  #dropPatched (name: string): void {
    const patched = this.#patched.get(name)
    if (patched === undefined) return
    for (const e of patched) this.#invalidate(e)
    patched.clear()
  }

  #notePatched (e: Entry): void {
    let patched = this.#patched.get(e.name)
    if (patched === undefined) this.#patched.set(e.name, patched = new Set())
    patched.add(e)
    // entries evicted or replaced meanwhile are never caught up: forget them now and then
    if (patched.size > 2 * this.store.limits.maxEntries) for (const old of patched) if (!this.store.holds(old)) patched.delete(old)
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
    // the top-level fields it may change (null: any — a replacement, a pipeline)
    const roots = updatedRoots(body.update)
    if (op.kind !== DELETE_ONE && op.kind !== DELETE_MANY) this.#dropRivalsOf(name, body, op.kind === REPLACE_ONE, id)
    if (id !== undefined) {
      // the entries holding the document, reads by its _id whatever their projection, and
      // answers whose projection left out (or computed) _id: they may hold it too
      const holding = new Set([...this.store.withId(name, id), ...this.store.byFilterId(name, id), ...this.store.unknownIds(name)])
      if (holding.size > 0) {
        // the driver sends undefined as null, or leaves the field out (ignoreUndefined): not patched
        const patchable = op.kind !== DELETE_ONE && op.kind !== DELETE_MANY && !hasUndefined(op.kind === REPLACE_ONE ? body.replacement : body.update)
        for (const e of holding) this.#patch(e, op, body, roots, patchable)
      }
    } else {
      this.#dropPatched(name)
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
    this.#applyToNegatives(name, op, body, roots)
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

  #applyToNegatives (name: string, op: WriteOp, body: WriteBody, roots: Set<string> | null): void {
    if (op.kind === DELETE_ONE || op.kind === DELETE_MANY) return
    const mayCreate = body.upsert === true || op.kind === REPLACE_ONE
    for (const e of this.store.negatives(name)) {
      if ((mayCreate && !disjoint(body.filter, e.filter)) || roots === null || intersects(roots, e.fields)) this.#invalidate(e)
    }
  }

  /** `patchable`: the write is one a cached document can be patched with (not a delete, no undefined). */
  #patch (e: Entry, op: WriteOp, body: WriteBody, roots: Set<string> | null, patchable: boolean): void {
    if (e.bytes === null) return
    // a projected answer lacks what the write may change or need (answers without _id are projected)
    if (!patchable || e.projected) {
      this.#invalidate(e)
      return
    }
    const doc = BSON.deserialize(e.bytes, EXACT)
    let next: Document | null = null
    if (op.kind === REPLACE_ONE && body.replacement !== undefined) {
      // the server keeps the document's _id, first
      const { _id: ignored, ...rest } = body.replacement
      next = { _id: doc._id as unknown, ...rest }
    } else if (applyUpdate(doc, body.update)) {
      next = doc
    }
    if (next === null || matches(e.filter, next) !== true) {
      this.#invalidate(e)
      return
    }
    this.patches++
    // a replacement may change any field (roots null); an update only the roots of its paths
    this.store.replace(e, BSON.serialize(next), next, roots)
    this.#notePatched(e)
  }
}
