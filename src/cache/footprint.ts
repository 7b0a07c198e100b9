import type { Document } from 'mongodb'
import { DELETE_MANY, DELETE_ONE, INSERT, REPLACE_ONE, type WriteOp } from '../write/write-op.js'
import { hasUndefined, isExactScalar } from './bson-values.js'
import { equalities, idKeyOf, isPlainDocument, matches, type Filter } from './filter-facts.js'
import { keyOf, UNKNOWN, valueHash, valueKeys, wellFormed } from './value-keys.js'

/**
 * A write's footprint: what it may change, as far as cached answers are concerned. One shape
 * for a write queued here (built when it is queued), a write still unsettled (the same object),
 * and another instance's batch (bus-message.ts carries it, merged over the batch). One rule,
 * `affects(footprint, answer)`, says whether it may change a cached answer, a load in flight
 * or an answer a read is about to cache; patching a cached document is separate
 * (write-effects.ts).
 *
 * Both sides also have index keys (index-keys.ts) in one key space.
 */
export interface Footprint {
  /** may change any answer (a collation compares strings its own way; a remote batch not decided) */
  all: boolean
  /** may change any existing document (a filter the cache does not decide) */
  anyDoc: boolean
  /** documents it may change or delete: the targets of their `_id`s (idValues: the `_id`s themselves) */
  ids: string[]
  idValues: unknown[]
  /** documents it may create: the targets of their `_id`s (newIdValues: the `_id`s) */
  newIds: string[]
  newIdValues: unknown[]
  /** may create a document whose `_id` is not known yet (an upsert by another field) */
  anyNewId: boolean
  /** equality filters of writes whose document's `_id` is not known: some document matching one changes */
  filters: Filter[]
  /** "field now holds value" in some document, as valueHash(field, valueKey) */
  hashes: number[]
  /** fields now holding values not told ($inc, $push, a dotted path…) */
  fields: string[]
  /** any field may now hold anything (a pipeline, a replacement not known) */
  anyField: boolean
  /** the new documents in full, when known (a local insert): matched instead of judged by hashes */
  docs: Document[] | undefined
}

/** The empty list every footprint starts with (shared, frozen: a write's lists are made when something goes in). */
const NONE = Object.freeze([]) as unknown as never[]

export function emptyFootprint (): Footprint {
  return { all: false, anyDoc: false, ids: NONE, idValues: NONE, newIds: NONE, newIdValues: NONE, anyNewId: false, filters: NONE, hashes: NONE, fields: NONE, anyField: false, docs: undefined }
}

/** `list` with `x` in it (a new list if it was the shared empty one). */
function added<T> (list: T[], x: T): T[] {
  if (list === NONE) return [x]
  if (!list.includes(x)) list.push(x)
  return list
}

const lookups = new WeakMap<readonly unknown[], Set<unknown>>()
/** Whether `list` holds `x`: a scan for a short list (one write's), a Set made once for a long one (a batch's). */
function holds<T> (list: readonly T[], x: T): boolean {
  if (list.length <= 8) return list.includes(x)
  let set = lookups.get(list)
  if (set === undefined) lookups.set(list, set = new Set(list))
  return set.has(x)
}

/** `field` now holds `value` in some document. */
function value (fp: Footprint, field: string, v: unknown): void {
  for (const key of valueKeys(v)) {
    if (key === UNKNOWN) fp.fields = added(fp.fields, field)
    else fp.hashes = added(fp.hashes, valueHash(field, key))
  }
}

function document (fp: Footprint, doc: Document | undefined): void {
  if (!isPlainDocument(doc)) { fp.anyField = true; return } // sent as something else (toBSON…), or not known
  for (const field in doc) value(fp, field, doc[field])
}

/** The fields an update changes: by value for a top-level `$set`, by name for anything else. */
function update (fp: Footprint, u: Document | Document[] | undefined): void {
  if (!isPlainDocument(u) || Array.isArray(u)) { fp.anyField = true; return } // a pipeline, or sent as something else
  for (const operator in u) {
    const fields: unknown = (u)[operator]
    if (!isPlainDocument(fields)) { fp.anyField = true; continue }
    for (const path in fields) {
      if (operator === '$unset') continue // a missing field equals no scalar: it makes nothing match
      const dot = path.indexOf('.')
      const root = dot === -1 ? path : path.slice(0, dot)
      const to: unknown = (fields)[path]
      if ((operator === '$set' || operator === '$setOnInsert') && root === path) value(fp, root, to)
      else fp.fields = added(fp.fields, root)
      if (operator === '$rename' && typeof to === 'string') fp.fields = added(fp.fields, to.split('.')[0] as string)
    }
  }
}

/** The `_id` an upsert gives the document it creates, if the write says it. */
function createdId (filter: Filter, u: Document | Document[] | undefined, replacement: Document | undefined): { id: unknown } | undefined {
  if (Object.hasOwn(filter, '_id') && equalities(filter) !== undefined) return { id: filter._id }
  if (replacement !== undefined) return Object.hasOwn(replacement, '_id') ? { id: replacement._id } : undefined
  if (u === undefined || Array.isArray(u)) return undefined
  for (const operator of ['$set', '$setOnInsert']) {
    const fields: unknown = u[operator]
    if (fields !== null && typeof fields === 'object' && Object.hasOwn(fields, '_id')) return { id: (fields as Document)._id }
  }
  return undefined
}

/** The write creates the `_id` `id`; one not an exact scalar (Decimal128 1 is 1 on the server) keys nothing: any `_id`. */
function newId (fp: Footprint, id: unknown): void {
  fp.newIds = [keyOf(id)]
  fp.newIdValues = [id]
  if (!isExactScalar(id)) fp.anyNewId = true
}

/**
 * The footprint of one write. `acknowledged`: the server answered it, and `upserted` is the
 * `_id` it upserted, if it did (then what it created is known); else the write is still
 * unsettled and an upsert may create a document of any `_id` its filter allows. Every string is
 * taken as the driver encodes it (value-keys.ts#wellFormed).
 */
export function footprintOf (op: WriteOp, acknowledged = false, upserted?: unknown): Footprint {
  const fp = emptyFootprint()
  if (op.kind === INSERT) {
    const doc = wellFormed(op.body.document as Document)
    newId(fp, op.id)
    // matched as it is only if sent as it is (a value with toBSON is judged by its field alone)
    if (isPlainDocument(doc) && !hasUndefined(doc)) fp.docs = [doc]
    document(fp, doc)
    return fp
  }
  const body = op.body
  if (body.collation !== undefined) { fp.all = true; return fp } // strings compared by the collation: not decided here
  const filter = wellFormed(body.filter)
  const id = idKeyOf(filter)
  const eq = id === undefined ? equalities(filter) : undefined
  if (id !== undefined) {
    fp.ids = [id]
    fp.idValues = [filter._id]
  } else if (eq !== undefined) fp.filters = [filter]
  else fp.anyDoc = true
  if (acknowledged && upserted !== undefined) newId(fp, upserted)
  if (op.kind === DELETE_ONE || op.kind === DELETE_MANY) return fp
  // a queued write's own update (a coalesced leader sends the merged one: ownUpdate keeps its own); an acknowledged one's as sent
  const u = wellFormed(acknowledged ? body.update : op.ownUpdate ?? body.update)
  const replacement = op.kind === REPLACE_ONE ? wellFormed(body.replacement) : undefined
  if (body.upsert === true) {
    // it may insert a document made of its filter's equalities and its update
    if (id !== undefined) value(fp, '_id', filter._id)
    else if (eq === undefined) fp.anyField = true
    else for (const [field, v] of eq) value(fp, field, v)
    if (!acknowledged) {
      const created = createdId(filter, u, replacement)
      if (created === undefined) fp.anyNewId = true
      else newId(fp, created.id)
    }
  }
  if (op.kind === REPLACE_ONE) document(fp, replacement)
  else update(fp, u)
  return fp
}

/** Found by another field than `_id` (or unreadable): it may land after a later write by `_id` and match its document. */
export function byFilter (fp: Footprint): boolean {
  return fp.all || fp.anyDoc || fp.filters.length > 0
}

/** A write's footprint; if making it fails (not expected of a validated write), one that may touch anything. */
export function safeFootprint (op: WriteOp): Footprint {
  try {
    return footprintOf(op)
  } catch {
    const fp = emptyFootprint()
    fp.all = true
    return fp
  }
}

/** A cached answer (or one a read is about to cache) as `affects` sees it. */
export interface Answer {
  filter: Filter
  /** target of the `_id` the filter pins alone (`{ _id: v }`), if it does */
  filterId: string | undefined
  /** a document was found (false: a cached "not found") */
  found: boolean
  /** the document, decoded exactly (numbers keep their BSON types); asked only for a found, unprojected answer */
  doc: () => Document
  projected: boolean
  /** target of the document's own `_id` when the answer shows it (or the filter pins it) */
  idKey: string | undefined
}

/** An answer from a decoded document. `idKnown`: the answer's `_id` is its document's own (see read-key.ts#showsId). */
export function answerOf (filter: Filter, doc: Document | null, projected: boolean, idKnown = !projected): Answer {
  const filterId = idKeyOf(filter)
  // a document's own _id keys it only when exact: another (Decimal128 1, {a: 1.0}) may equal other forms on the server
  const idKey = doc === null ? undefined : filterId ?? (idKnown && isExactScalar(doc._id) ? keyOf(doc._id) : undefined)
  return { filter, filterId, found: doc !== null, doc: () => doc as Document, projected, idKey }
}

/** Whether a write of footprint `fp` may change `answer` (when in doubt: yes). */
export function affects (fp: Footprint, a: Answer): boolean {
  if (fp.all) return true
  if (a.found) {
    if (fp.anyDoc) return true
    // a document whose _id the answer does not show may be any of the written ones
    if (a.idKey === undefined ? fp.ids.length > 0 : holds(fp.ids, a.idKey)) return true
    if (fp.filters.length > 0) {
      if (a.projected) return true // the projection may hide the fields a filter tests
      const doc = a.doc()
      for (const f of fp.filters) if (matches(f, doc) !== false) return true
    }
  } else if (a.filterId !== undefined) {
    return fp.anyNewId || holds(fp.newIds, a.filterId)
  }
  if (a.filterId !== undefined) return false
  // another document may come to match the filter (and be the server's answer instead)
  if (fp.docs !== undefined) {
    for (const d of fp.docs) if (matches(a.filter, d) !== false) return true
    return false
  }
  if (fp.anyField) return true
  for (const field in a.filter) {
    if (holds(fp.fields, field) || holds(fp.hashes, valueHash(field, keyOf(a.filter[field])))) return true
  }
  return false
}
