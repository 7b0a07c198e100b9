import { Binary, BSON } from 'mongodb'
import type { Document } from 'mongodb'
import { targetOf, targetOfId } from '../write/target.js'
import type { WriteOp } from '../write/write-op.js'
import { isExactScalar } from './bson-values.js'
import { equalities, type Filter } from './filter-facts.js'
import { affects, emptyFootprint, footprintOf, type Answer, type Footprint } from './footprint.js'
import { keyOf } from './value-keys.js'

/**
 * What one acknowledged batch did, as far as other instances' caches are concerned: which
 * documents it touched and which cached filters it may have made match another document.
 * Never the documents themselves: values a write gave to fields travel only as 32-bit hashes
 * (a collision drops an entry too many, never one too few).
 *
 * A receiver drops (remoteFootprint, then write-effects.ts#applyRemote):
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

/**
 * The effects of acknowledged writes (one batch: one collection), as the merged footprint of
 * its writes (footprint.ts#footprintOf, the same footprint a write queued here has) put on the
 * wire. `upsertedIdOf(i)` is the `_id` the i-th write upserted, if it did.
 */
export function summarize (ops: readonly WriteOp[], upsertedIdOf: (index: number) => unknown, acknowledged = true): RemoteWrite {
  const ids = new Map<string, unknown>()
  const filters = new Map<string, Filter>()
  const hashes = new Set<number>()
  const fields = new Set<string>()
  let anyField = false
  let all = false
  const add = (fp: Footprint): void => {
    // a filter not decided here may have touched anything; a write told unknown may have created any _id
    all ||= fp.all || fp.anyDoc || (!acknowledged && fp.anyNewId)
    fp.ids.forEach((t, k) => ids.set(t, fp.idValues[k]))
    fp.newIds.forEach((t, k) => ids.set(t, fp.newIdValues[k]))
    for (const f of fp.filters) filters.set(targetOf(f), f)
    for (const h of fp.hashes) hashes.add(h)
    for (const f of fp.fields) fields.add(f)
    anyField ||= fp.anyField
  }
  for (let i = 0; i < ops.length; i++) {
    const op = ops[i] as WriteOp
    add(footprintOf(op, acknowledged, upsertedIdOf(i)))
    // not acknowledged, a write's footprint is its own update's: those merged into it are their own
    if (!acknowledged && op.coalesced !== null) for (const c of op.coalesced) add(footprintOf(c, false, undefined))
  }
  return { ids: [...ids.values()], filters: [...filters.values()], hashes: [...hashes], fields: [...fields], anyField, all }
}

/**
 * A received batch as a footprint: the receiver cannot tell a document changed from one
 * created, so every `_id` counts as both.
 */
export function remoteFootprint (write: RemoteWrite): Footprint {
  const fp = emptyFootprint()
  // an _id that is not an exact scalar may equal other forms on the server (Decimal128 1 is the
  // _id 1): its key decides nothing, so the batch may have touched any document
  fp.all = write.all || write.ids.some(id => !isExactScalar(id))
  fp.ids = fp.newIds = write.ids.map(keyOf)
  fp.idValues = fp.newIdValues = write.ids
  fp.filters = write.filters
  fp.hashes = write.hashes
  fp.fields = write.fields
  fp.anyField = write.anyField
  return fp
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

/** Whether any of these remote batches may have changed the answer (when in doubt: yes). */
export function raced (remote: readonly Footprint[], answer: Answer): boolean {
  try {
    for (const fp of remote) if (affects(fp, answer)) return true
    return false
  } catch {
    return true
  }
}
