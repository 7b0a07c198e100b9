import { BSON } from 'mongodb'
import type { Document } from 'mongodb'
import { DELETE_MANY, DELETE_ONE, INSERT, REPLACE_ONE, type WriteBody, type WriteOp } from '../write/write-op.js'
import type { Entry, EntryStore } from './entry-store.js'
import { compile, disjoint, intersects, matches, updatedRoots, type Filter } from './filter-facts.js'

/**
 * What a write does to cached answers, applied when the write is queued (read-your-writes):
 * - a cached document the write's filter matches is patched in place when the update is
 *   plain $set / $unset / $inc (or a replacement), else dropped;
 * - a cached `null` that an insert, an upsert or a change to a filtered field could turn
 *   into a document is dropped;
 * - a projected entry the write may select is dropped (it may lack the fields to decide).
 */
export class WriteEffects {
  invalidations = 0
  patches = 0

  constructor (readonly store: EntryStore) {}

  /** Keeps every cached answer `op` may change in step with it. Never throws. */
  apply (name: string, op: WriteOp): void {
    const all = this.store.inCollection(name)
    if (all === undefined || all.size === 0) return
    try {
      this.#apply(name, op, all)
    } catch {
      // the matcher could not follow the write's filter: drop what it might have touched
      this.invalidateAll(name)
    }
  }

  /** Drops every entry of a collection (a failed write may have been patched into them). */
  invalidateAll (name: string): void {
    const all = this.store.inCollection(name)
    if (all !== undefined) for (const e of [...all]) this.#invalidate(e)
  }

  #invalidate (entry: Entry): void {
    this.invalidations++
    this.store.remove(entry)
  }

  #apply (name: string, op: WriteOp, all: Set<Entry>): void {
    const negatives = this.store.negatives(name)
    if (op.kind === INSERT) {
      const doc = op.body.document as Document
      if (negatives !== undefined) for (const e of [...negatives]) if (e.test(doc)) this.#invalidate(e)
      return
    }
    const body = op.body
    // a write by one _id can only touch entries holding that document, plus cached nulls
    const byId = op.target.charCodeAt(0) !== 123 /* '{': not a lone-_id target */
    const candidates = byId ? this.store.withId(name, op.target) : all
    if (candidates !== undefined) {
      const writeTest = compile(body.filter)
      for (const e of [...candidates]) {
        if (e.bytes === null || e.projected) continue
        const doc = BSON.deserialize(e.bytes)
        if (writeTest(doc)) this.#patch(e, op, doc, body)
      }
    }
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
    if (op.kind === REPLACE_ONE && body.replacement !== undefined) {
      next = { ...body.replacement, _id: doc._id as unknown }
    } else if (op.kind !== DELETE_ONE && op.kind !== DELETE_MANY && applyUpdate(doc, body.update)) {
      next = doc
    }
    if (next === null || !e.test(next)) {
      this.#invalidate(e)
      return
    }
    this.patches++
    this.store.replaceBytes(e, BSON.serialize(next))
  }
}

/** Whether `op` could change what findOne(filter) returns, given what it returned (`doc`). */
export function affects (op: WriteOp, doc: Document | null, filter: Filter, filterFields: Set<string>): boolean {
  if (op.kind === INSERT) return doc === null && matches(filter, op.body.document)
  const body = op.body
  if (doc !== null) return matches(body.filter, doc)
  if (op.kind === DELETE_ONE || op.kind === DELETE_MANY) return false
  if (body.upsert === true || op.kind === REPLACE_ONE) {
    return !disjoint(body.filter, filter) || intersects(updatedRoots(body.update) ?? new Set(['$']), filterFields)
  }
  const roots = updatedRoots(body.update)
  return roots === null || intersects(roots, filterFields)
}

/** Applies $set / $unset / $inc to a plain document; false when it cannot predict the result. */
function applyUpdate (doc: Document, update: Document | Document[] | undefined): boolean {
  if (update === undefined || Array.isArray(update)) return false
  for (const op in update) {
    if (op !== '$set' && op !== '$unset' && op !== '$inc' && op !== '$setOnInsert') return false
    if (op === '$setOnInsert') continue // the document exists: no effect
    const fields = update[op] as Document
    for (const path in fields) {
      if (!applyPath(doc, op, path, fields[path])) return false
    }
  }
  return true
}

function applyPath (doc: Document, op: string, path: string, value: unknown): boolean {
  const parts = path.split('.')
  let node: Document = doc
  for (let i = 0; i < parts.length - 1; i++) {
    const p = parts[i] as string
    let next: unknown = node[p]
    if (next === undefined || next === null) {
      if (op === '$unset') return true // nothing to unset
      next = node[p] = {}
    }
    if (typeof next !== 'object' || Array.isArray(next) || (next as { _bsontype?: unknown })._bsontype !== undefined) return false
    node = next as Document
  }
  const leaf = parts[parts.length - 1] as string
  if (op === '$set') node[leaf] = value
  else if (op === '$unset') delete node[leaf]
  else {
    const cur: unknown = node[leaf] ?? 0
    if (typeof value !== 'number' || typeof cur !== 'number') return false
    node[leaf] = cur + value
  }
  return true
}
