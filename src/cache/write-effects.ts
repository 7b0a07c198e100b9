import { BSON } from 'mongodb'
import type { Document } from 'mongodb'
import { DELETE_MANY, DELETE_ONE, INSERT, REPLACE_ONE, type WriteBody, type WriteOp } from '../write/write-op.js'
import { applyUpdate } from './apply-update.js'
import { hasUndefined } from './bson-values.js'
import type { Entry, EntryStore } from './entry-store.js'
import { idKeyOf, matches, updatedRoots } from './filter-facts.js'
import { affects, byFilter, footprintOf, type Footprint } from './footprint.js'
import { entryKeys, footprintKeys } from './index-keys.js'
import { wellFormed } from './value-keys.js'

/**
 * Decoding for patches, which encode the document again: every number keeps its BSON type
 * (int32, int64, double), a regular expression its flags (a JS RegExp drops those it lacks).
 */
const EXACT = { promoteValues: false, promoteLongs: false, bsonRegExp: true } as const

/**
 * What a write does to cached answers (read-your-writes): every entry its footprint may affect
 * (footprint.ts#affects, found through the entries' index keys) is dropped, except that a write
 * by `{ _id: value }` patches the entries holding exactly that document when its update can be
 * applied exactly as the server would ($set, $unset, $inc, $setOnInsert on plain paths, or a
 * replacement) and no write found by another field is unsettled. Another instance's batch
 * (cache bus) is never patched in: it only drops.
 */
export class WriteEffects {
  invalidations = 0
  patches = 0

  /** Per collection: entries patched by writes still unsettled here (ahead of the server). */
  readonly #patched = new Map<string, Set<Entry>>()

  constructor (readonly store: EntryStore) {}

  /** No write to the document `idKey` is unsettled any more: its entries show what the server has. */
  caughtUp (name: string, idKey: string): void {
    const patched = this.#patched.get(name)
    if (patched !== undefined) for (const e of this.store.withId(name, idKey)) patched.delete(e)
  }

  /**
   * A write queued here, of footprint `fp`. `mayPatch` false: a write by another field is
   * unsettled (NotedWrites.filterWriteUnsettled), so entries are dropped, not patched. Never
   * throws: an unexpected failure drops the collection's entries instead.
   */
  apply (name: string, op: WriteOp, fp: Footprint = footprintOf(op), keys: readonly string[] = footprintKeys(fp), mayPatch = true): void {
    if (!this.store.has(name)) return
    try {
      this.#apply(name, fp, keys, mayPatch ? op : undefined)
    } catch {
      this.invalidateAll(name)
    }
  }

  /**
   * Another instance's acknowledged batch (bus-message.ts says what it carries): drops every
   * entry it may have changed. Never throws: an unexpected failure drops the collection's
   * entries instead.
   */
  applyRemote (name: string, fp: Footprint): void {
    if (!this.store.has(name)) return
    try {
      this.#apply(name, fp, footprintKeys(fp), undefined)
    } catch {
      this.invalidateAll(name)
    }
  }

  /** Drops every entry of a collection (a failed write may have been patched into them). */
  invalidateAll (name: string): void {
    for (const e of this.store.inCollection(name)) this.#invalidate(e)
  }

  #apply (name: string, fp: Footprint, keys: readonly string[], op: WriteOp | undefined): void {
    if (fp.all) {
      this.invalidateAll(name)
      return
    }
    if (byFilter(fp)) this.#dropPatched(name)
    const candidates = this.store.candidates(name, entryKeys(fp, keys))
    if (candidates.length === 0) return
    // a write by _id patches the entries holding its document, if it can be applied exactly
    let patch: { op: WriteOp, body: WriteBody, target: string, roots: Set<string> | null } | undefined
    if (op !== undefined && op.kind !== INSERT && op.kind !== DELETE_ONE && op.kind !== DELETE_MANY) {
      const body = op.body
      const target = idKeyOf(body.filter)
      // the driver sends undefined as null, or leaves the field out (ignoreUndefined): not patched
      if (target !== undefined && !hasUndefined(op.kind === REPLACE_ONE ? body.replacement : body.update)) {
        // a replacement may change any field (roots null); an update only the roots of its paths
        patch = { op, body, target, roots: updatedRoots(body.update) }
      }
    }
    for (const e of candidates) {
      if (!affects(fp, this.store.answer(e))) continue
      // a projected answer lacks what the write may change or need (answers without _id are projected)
      if (patch !== undefined && e.bytes !== null && !e.projected && e.idKey === patch.target) this.#patch(e, patch.op, patch.body, patch.roots)
      else this.#invalidate(e)
    }
  }

  /**
   * A write found by another field than `_id` is matched against the server's documents, not
   * against entries patched by writes of ours still unsettled: those show values the server
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

  #patch (e: Entry, op: WriteOp, body: WriteBody, roots: Set<string> | null): void {
    const doc = BSON.deserialize(e.bytes as Uint8Array, EXACT)
    let next: Document | null = null
    // a field of the deprecated BSON type undefined decodes to undefined, which would not be
    // encoded again as it is: such a document is not patched
    if (hasUndefined(doc)) next = null
    else if (op.kind === REPLACE_ONE && body.replacement !== undefined) {
      // the server keeps the document's _id, first
      const { _id: ignored, ...rest } = wellFormed(body.replacement)
      next = { _id: doc._id as unknown, ...rest }
    } else if (applyUpdate(doc, wellFormed(body.update))) {
      next = doc
    }
    if (next === null || matches(e.filter, next) !== true) {
      this.#invalidate(e)
      return
    }
    this.patches++
    this.store.replace(e, BSON.serialize(next), next, roots)
    this.#notePatched(e)
  }
}
