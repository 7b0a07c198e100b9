import { Binary, BSON } from 'mongodb'
import type { Document } from 'mongodb'
import { targetOf, targetOfId } from '../write/target.js'
import { DELETE_MANY, DELETE_ONE, INSERT, REPLACE_ONE, type WriteOp } from '../write/write-op.js'
import { equalities, idTargetOf, matches, type Filter } from './filter-facts.js'
import { UNKNOWN, valueHash, valueKeys } from './value-keys.js'

/**
 * What one acknowledged batch did, as far as other instances' caches are concerned: which
 * documents it touched and which cached filters it may have made match another document.
 * Never the documents themselves: values a write gave to fields travel only as 32-bit hashes
 * (a collision drops an entry too many, never one too few).
 *
 * A receiver drops (write-effects.ts#applyRemote):
 * - `all`: every entry of the collection (a write whose filter the cache does not decide, or
 *   with a collation);
 * - `ids`: the entries holding one of these documents, and cached reads by these `_id`s
 *   (cached nulls included);
 * - `filters`: the entries whose document one of these equality filters may match (writes
 *   whose `_id` is not known: `updateOne({ email }, …)`);
 * - `hashes`: the entries whose filter has an equality `field: value` with one of these
 *   hashes (a write set `field` to `value`: another document may now match);
 * - `fields`: the entries whose filter tests one of these fields (a write changed them to
 *   values not told: `$inc`, `$push`, a dotted path…); `anyField`: every entry with such a
 *   filter (an update pipeline).
 */
export interface RemoteWrite {
  ids: unknown[]
  filters: Filter[]
  hashes: number[]
  fields: string[]
  anyField: boolean
  all: boolean
}

/** A message as received: who sent it, which collection, what to drop. */
export interface BusMessage {
  source: string
  name: string
  write: RemoteWrite
}

export const MESSAGE_VERSION = 1
/** Past this size a message says "drop the collection" instead (`all`). */
export const MAX_MESSAGE_BYTES = 64 * 1024

/** Collects a batch's effects, deduplicated. */
class Summary {
  readonly ids = new Map<string, unknown>()
  readonly filters = new Map<string, Filter>()
  readonly hashes = new Set<number>()
  readonly fields = new Set<string>()
  anyField = false
  all = false

  id (value: unknown): void {
    this.ids.set(targetOfId(value), value)
  }

  /** `field` now holds `value` in some document. */
  value (field: string, value: unknown): void {
    for (const key of valueKeys(value)) {
      if (key === UNKNOWN) this.fields.add(field)
      else this.hashes.add(valueHash(field, key))
    }
  }

  document (doc: Document | undefined): void {
    if (doc === undefined) { this.anyField = true; return }
    for (const field in doc) this.value(field, doc[field])
  }

  update (update: Document | Document[] | undefined): void {
    if (update === undefined || Array.isArray(update)) { this.anyField = true; return }
    for (const operator in update) {
      const fields: unknown = update[operator]
      if (fields === null || typeof fields !== 'object') { this.anyField = true; continue }
      for (const path in fields) {
        if (operator === '$unset') continue // a missing field equals no scalar: it makes nothing match
        const root = path.split('.')[0] as string
        const to: unknown = (fields as Document)[path]
        if ((operator === '$set' || operator === '$setOnInsert') && root === path) this.value(root, to)
        else this.fields.add(root)
        if (operator === '$rename' && typeof to === 'string') this.fields.add(to.split('.')[0] as string)
      }
    }
  }

  result (): RemoteWrite {
    return {
      ids: [...this.ids.values()],
      filters: [...this.filters.values()],
      hashes: [...this.hashes],
      fields: [...this.fields],
      anyField: this.anyField,
      all: this.all,
    }
  }
}

/**
 * The effects of acknowledged writes (one batch: one collection). `upsertedIdOf(i)` is the
 * `_id` the i-th write upserted, if it did.
 */
export function summarize (ops: readonly WriteOp[], upsertedIdOf: (index: number) => unknown): RemoteWrite {
  const s = new Summary()
  for (let i = 0; i < ops.length; i++) {
    const op = ops[i] as WriteOp
    const body = op.body
    if (op.kind === INSERT) {
      s.id(op.id)
      s.document(body.document)
      continue
    }
    if (body.collation !== undefined) s.all = true // strings compared by the collation: not decided here
    else if (idTargetOf(body.filter) !== undefined) s.id(body.filter._id)
    else if (equalities(body.filter) !== undefined) s.filters.set(targetOf(body.filter), body.filter)
    else s.all = true
    const upserted = upsertedIdOf(i)
    if (upserted !== undefined) s.id(upserted)
    if (op.kind === DELETE_ONE || op.kind === DELETE_MANY) continue
    // an upsert may insert a document made of its filter's equalities
    if (body.upsert === true) {
      const eq = equalities(body.filter)
      if (eq === undefined) s.anyField = true
      else for (const [field, value] of eq) s.value(field, value)
    }
    if (op.kind === REPLACE_ONE) s.document(body.replacement)
    else s.update(body.update)
  }
  return s.result()
}

/** One BSON document: `{ v, s, c, i?, q?, h?, f?, a?, w? }`; `_id`s keep their BSON types. */
export function encode (source: string, name: string, write: RemoteWrite): Uint8Array {
  const doc: Document = { v: MESSAGE_VERSION, s: source, c: name }
  if (!write.all) {
    if (write.ids.length > 0) doc.i = write.ids
    if (write.filters.length > 0) doc.q = write.filters
    if (write.hashes.length > 0) {
      const bytes = Buffer.allocUnsafe(write.hashes.length * 4)
      for (let k = 0; k < write.hashes.length; k++) bytes.writeUInt32LE(write.hashes[k] as number, k * 4)
      doc.h = new Binary(bytes)
    }
    if (write.fields.length > 0) doc.f = write.fields
    if (write.anyField) doc.a = true
  } else {
    doc.w = true
  }
  let bytes: Uint8Array | undefined
  try {
    bytes = BSON.serialize(doc)
  } catch {
    // too big for one BSON document (or unserializable): say "drop the collection" instead
  }
  if (bytes !== undefined && (bytes.byteLength <= MAX_MESSAGE_BYTES || write.all)) return bytes
  return BSON.serialize({ v: MESSAGE_VERSION, s: source, c: name, w: true })
}

/** Numbers come back as numbers, Longs as Longs, Binary/UUID as Binary: the same targets as sent. */
const DECODE = { promoteLongs: false, promoteBuffers: false } as const

function isStringArray (v: unknown): v is string[] {
  return Array.isArray(v) && v.every(x => typeof x === 'string')
}

/**
 * Parses a message; throws on anything malformed. A message of another version that names
 * its collection is read as "drop that collection" (a rolling upgrade must not leave entries
 * stale).
 */
export function decode (bytes: Uint8Array): BusMessage {
  const doc = BSON.deserialize(bytes, DECODE)
  const { v, s, c } = doc
  if (typeof s !== 'string' || typeof c !== 'string' || c === '') throw new TypeError('no source or collection')
  const write: RemoteWrite = { ids: [], filters: [], hashes: [], fields: [], anyField: false, all: false }
  if (v !== MESSAGE_VERSION || doc.w === true) {
    write.all = true
    return { source: s, name: c, write }
  }
  const { i, q, h, f, a } = doc
  if (i !== undefined) {
    if (!Array.isArray(i)) throw new TypeError('i is not an array')
    // every id must have a target: a forged value (a plain object posing as a BSON type) throws here, not in a reader
    for (const id of i as unknown[]) targetOfId(id)
    write.ids = i
  }
  if (q !== undefined) {
    if (!Array.isArray(q)) throw new TypeError('q is not an array')
    for (const filter of q as unknown[]) {
      if (filter === null || typeof filter !== 'object' || Array.isArray(filter)) throw new TypeError('q holds a non-document')
      targetOf(filter as Record<string, unknown>) // throws on a forged value, as for ids
      // a filter this cache does not decide: it may touch anything
      if (equalities(filter) === undefined) write.all = true
      else write.filters.push(filter)
    }
  }
  if (h !== undefined) {
    if (!(h instanceof Binary) || h.position % 4 !== 0) throw new TypeError('h is not a Binary of uint32s')
    const view = Buffer.from(h.buffer.buffer, h.buffer.byteOffset, h.position)
    for (let k = 0; k < view.byteLength; k += 4) write.hashes.push(view.readUInt32LE(k))
  }
  if (f !== undefined) {
    if (!isStringArray(f)) throw new TypeError('f is not an array of strings')
    write.fields = f
  }
  if (a !== undefined && typeof a !== 'boolean') throw new TypeError('a is not a boolean')
  write.anyField = a === true
  return { source: s, name: c, write }
}

/**
 * Whether a remote write may have changed the answer `doc` of findOne(`filter`): the same
 * rules as write-effects.ts#applyRemote applies to cached entries, for a load in flight.
 * `idKnown`: the answer's `_id` is its document's own (a projection neither left it out nor
 * computed it).
 */
export function remoteAffects (write: RemoteWrite, doc: Document | null, filter: Filter, projected: boolean, idKnown = !projected): boolean {
  if (write.all) return true
  const filterId = idTargetOf(filter)
  const docId = doc === null || doc._id === undefined || !idKnown ? undefined : targetOfId(doc._id)
  // a document whose _id the answer does not show may be any of the written ones
  if (doc !== null && docId === undefined && write.ids.length > 0) return true
  for (const id of write.ids) {
    const target = targetOfId(id)
    if (target === filterId || target === docId) return true
  }
  if (doc !== null && write.filters.length > 0) {
    if (projected) return true
    for (const f of write.filters) if (matches(f, doc) !== false) return true
  }
  if (filterId !== undefined) return false
  const eq = equalities(filter)
  if (eq === undefined || write.anyField) return true
  for (const [field, value] of eq) {
    if (write.fields.includes(field) || write.hashes.includes(valueHash(field, targetOfId(value)))) return true
  }
  return false
}
