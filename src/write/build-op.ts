import { MongoClient, ObjectId } from 'mongodb'
import type { Document, PkFactory } from 'mongodb'
import { bsonSize, estimateSize, estimateValueSize, exactBsonSize, EXACT_ABOVE, IN_FILTER, IN_UPDATE, NO_OPERATOR_KEYS, SKIP_ID } from './bson-size.js'
import { InvalidOptionError, InvalidWriteError, describe } from '../errors.js'
import { targetOf, targetOfId } from './target.js'
import { checkPipelineStages, checkUpdateOperators, operatorProblem } from './update-operators.js'
import {
  WriteOp, INSERT, UPDATE_ONE, UPDATE_MANY, REPLACE_ONE, DELETE_ONE, DELETE_MANY, type Kind, type WriteBody,
} from './write-op.js'
import { checkOptions, isDocument, isEmbeddable, type DeleteOptions, type OptionSet, type ReplaceOptions, type UpdateOptions, type WriteOptions } from './write-options.js'

export type { WriteOptions, UpdateOptions, ReplaceOptions, DeleteOptions } from './write-options.js'

/**
 * The driver refuses a whole bulkWrite (MongoInvalidArgumentError, before sending anything)
 * when one of its entries serializes to maxBsonObjectSize (16 MiB) bytes *or more*: an
 * insert's document, or the statement it builds for any other write — `{ q, u, upsert, multi,
 * hint, arrayFilters, collation }` for updates and replacements, `{ q, limit, collation, hint }`
 * for deletes (bulk/unordered.js: `bsonSize >= maxBsonObjectSize`). Measured with driver 7:
 * 16 MiB − 1 is sent, 16 MiB is refused, whatever the server (the test stand-in itself takes
 * more). So a write whose entry reaches it is refused here, alone, before it can fail its
 * batch-mates.
 */
const MAX_BSON_BYTES = 16 * 1024 * 1024
/** What the statement around the parts adds (keys, types, upsert, multi, limit): a bound. */
const STATEMENT_OVERHEAD = 64
/** What a generated `_id` adds to a document: its key (type byte, `_id`, NUL) and an ObjectId's 12 bytes. */
const GENERATED_ID_BYTES = 2 + 3 + 12

/** bsonSize of one part of a write (estimated below 4 MiB, exact above; `rules`: IN_FILTER for a filter), a serialization failure as InvalidWriteError. */
function sizeOf (what: string, value: object, rules = 0): number {
  try {
    return bsonSize(value, rules)
  } catch (err) {
    throw new InvalidWriteError(`${what} cannot be serialized to BSON (${(err as Error).message}): ${describe(value)}`)
  }
}

function checkLimit (what: string, n: number): void {
  if (n >= MAX_BSON_BYTES) {
    throw new InvalidWriteError(`${what} is ${n} bytes, over the 16 MiB BSON document limit (at most ${MAX_BSON_BYTES - 1} bytes can be sent)`)
  }
}

/**
 * Checks the statement the driver will build for a non-insert write against the limit.
 * `approx` is the sum of its parts' estimates: at or under EXACT_ABOVE the statement cannot
 * reach 16 MiB (see bson-size.ts), so only big writes pay for an exact measurement.
 */
function checkStatement (what: string, kind: Kind, body: WriteBody, approx: number): void {
  if (approx + STATEMENT_OVERHEAD <= EXACT_ABOVE) return
  let n: number
  try {
    n = exactBsonSize(statementOf(kind, body))
  } catch (err) {
    throw new InvalidWriteError(`${what} cannot be serialized to BSON (${(err as Error).message})`)
  }
  checkLimit(what, n)
}

/** The entry the driver builds and measures for a write (its makeUpdateStatement / makeDeleteStatement). */
export function statementOf (kind: Kind, body: WriteBody): Document {
  const s: Document = { q: body.filter }
  if (kind === DELETE_ONE || kind === DELETE_MANY) {
    s.limit = kind === DELETE_ONE ? 1 : 0
  } else {
    s.u = kind === REPLACE_ONE ? body.replacement : body.update
    if (body.upsert !== undefined) s.upsert = body.upsert
    if (kind === UPDATE_MANY) s.multi = true
    if (body.arrayFilters !== undefined) s.arrayFilters = body.arrayFilters
  }
  if (body.hint !== undefined) s.hint = body.hint
  if (body.collation !== undefined) s.collation = body.collation
  return s
}

export function validateCollectionName (name: unknown): string {
  if (typeof name !== 'string' || name.length === 0 || name.length > 255 || name.includes('\0') ||
    name.includes('$') || name.startsWith('system.') || name.startsWith('.') || name.endsWith('.')) {
    throw new InvalidWriteError(`invalid collection name: ${describe(name)}`)
  }
  return name
}

function checkFilter (filter: unknown): Document {
  if (!isDocument(filter)) throw new InvalidWriteError(`filter must be a plain object, got ${describe(filter)}`)
  return filter
}

/**
 * The hot path of checkUpdate and sizeOf('update'): one walk over an operator-style update
 * that checks what checkUpdate checks and sums bsonSize's estimate. Returns -1 for anything
 * else (a pipeline, a problem, a value the estimate cannot read): checkUpdate and sizeOf then
 * run one by one and name the problem. Never throws.
 */
function quickUpdate (update: unknown): number {
  if (Array.isArray(update) || !isDocument(update)) return -1
  let n = 5
  try {
    for (const op in update) {
      if (op.charCodeAt(0) !== 36 /* $ */) return -1
      const arg: unknown = update[op]
      if (!isEmbeddable(arg) || operatorProblem(op, arg) !== undefined) return -1
      const v = estimateValueSize(arg, IN_UPDATE)
      if (v < 0) return -1
      n += 2 + op.length + v
    }
  } catch {
    return -1
  }
  return n === 5 || n > EXACT_ABOVE ? -1 : n // none: not an update (checkUpdate says so)
}

function checkUpdate (update: unknown): Document | Document[] {
  if (Array.isArray(update)) {
    if (update.length === 0) throw new InvalidWriteError('update pipeline must not be empty')
    for (const stage of update) {
      if (!isDocument(stage) || !hasOnlyOperators(stage)) {
        throw new InvalidWriteError(`update pipeline stage must be an object of $-operators, got ${describe(stage)}`)
      }
    }
    checkPipelineStages(update as Document[])
    return update as Document[]
  }
  if (!isDocument(update)) throw new InvalidWriteError(`update must be an object of update operators, got ${describe(update)}`)
  if (!hasOnlyOperators(update)) {
    throw new InvalidWriteError(`update must contain only update operators ($set, $inc, ...), got ${describe(update)}`)
  }
  for (const op in update) {
    const arg: unknown = update[op]
    if (!isEmbeddable(arg)) throw new InvalidWriteError(`update operator ${op} needs an object, got ${describe(arg)}`)
  }
  checkUpdateOperators(update)
  return update
}

function hasOnlyOperators (doc: Document): boolean {
  let any = false
  for (const k in doc) {
    if (k.charCodeAt(0) !== 36 /* $ */) return false
    any = true
  }
  return any
}

function checkNoOperators (what: string, doc: Document): void {
  for (const k in doc) {
    if (k.charCodeAt(0) === 36) throw new InvalidWriteError(`${what} must not contain $-prefixed top-level keys, got ${JSON.stringify(k)}`)
  }
}

/**
 * The client's pkFactory (`new MongoClient(url, { pkFactory })`, or the Db's own), unless it
 * is the driver's default: that one makes ObjectIds, as the buffer does itself. The default
 * is not exported by the driver: it is what a client given no pkFactory holds.
 */
let driverDefaultPk: unknown = null
export function customPkFactory (pkFactory: unknown): PkFactory | undefined {
  if (pkFactory === undefined || pkFactory === null) return undefined
  if (typeof (pkFactory as PkFactory).createPk !== 'function') throw new InvalidOptionError(`pkFactory must have a createPk function, got ${describe(pkFactory)}`)
  if (driverDefaultPk === null) {
    try {
      driverDefaultPk = new MongoClient('mongodb://127.0.0.1/').options.pkFactory
    } catch {
      driverDefaultPk = undefined // every pkFactory is then used as given: slower, still correct
    }
  }
  return pkFactory === driverDefaultPk ? undefined : pkFactory as PkFactory
}

function createPk (pkFactory: PkFactory, doc: Document): unknown {
  let id: unknown
  try {
    id = pkFactory.createPk()
  } catch (err) {
    throw new InvalidWriteError(`the client's pkFactory.createPk() threw (${(err as Error | null)?.message ?? String(err)}): no _id for ${describe(doc)}`)
  }
  if (id === undefined || id === null || typeof id === 'function' || typeof id === 'symbol') {
    throw new InvalidWriteError(`the client's pkFactory.createPk() returned ${describe(id)}: no _id for ${describe(doc)}`)
  }
  return id
}

/**
 * `pkFactory`: the client's own (customPkFactory), or undefined for ObjectIds.
 */
export function buildInsert (doc: unknown, options: WriteOptions | undefined, pkFactory?: PkFactory): WriteOp {
  if (!isDocument(doc)) throw new InvalidWriteError(`document must be a plain object, got ${describe(doc)}`)
  checkOptions(options, 'insert')
  // the hot path: one walk checks the keys and estimates the size, a generated ObjectId `_id`
  // counted in advance (the document is not changed before it is known to be good); anything
  // unusual (a custom pkFactory) or wrong takes the checks one by one, which name the problem
  const id: unknown = doc._id
  const generate = id === undefined || id === null
  // BSON leaves a function or a Symbol out: the server would store another _id than the one reported
  if (typeof id === 'function' || typeof id === 'symbol') throw new InvalidWriteError(`_id cannot be ${describe(id)}: BSON does not send it, and the server would give the document another _id`)
  let bytes = pkFactory === undefined || !generate ? estimateSize(doc, generate ? NO_OPERATOR_KEYS | SKIP_ID : NO_OPERATOR_KEYS) : -1
  if (bytes < 0) checkNoOperators('document', doc)
  let ownId = false
  // Assigned before queuing (as the driver does) so the caller knows the _id at once,
  // and so a retried insert is recognisable: its _id can only collide with itself.
  // `_id: null` counts as none: the driver would replace it with a new id (`_id == null`),
  // so the caller would be told null while another id is stored.
  if (generate) {
    if (pkFactory === undefined) {
      doc._id = new ObjectId()
      ownId = true
    } else {
      // the factory's id is as unique as the factory makes it: it counts as the caller's
      // (not fresh: a duplicate key on a retry cannot be taken for our own earlier attempt)
      doc._id = createPk(pkFactory, doc)
    }
  }
  if (bytes >= 0 && ownId) bytes += GENERATED_ID_BYTES
  // a generated _id's target is computed only if ever needed; a caller's _id is checked now
  let target: string | null = null
  try {
    if (bytes < 0 || bytes > EXACT_ABOVE) bytes = sizeOf('document', doc)
    checkLimit('document', bytes) // estimated under 4 MiB, exact above: the document is the statement
    if (!ownId) {
      try {
        target = targetOfId(doc._id)
      } catch (err) {
        throw new InvalidWriteError(`_id cannot be serialized to BSON (${(err as Error).message}): ${describe(doc._id)}`)
      }
    }
  } catch (err) {
    // refused: the caller's document is left as it was given, without the _id given to it above
    if (generate) {
      if (id === undefined) delete doc._id
      else doc._id = id
    }
    throw err
  }
  return new WriteOp(INSERT, { insertOne: { document: doc } }, target, bytes, doc._id, ownId)
}

export function buildUpdate (many: boolean, filter: unknown, update: unknown, options: UpdateOptions | undefined): WriteOp {
  const f = checkFilter(filter)
  const quick = quickUpdate(update)
  const u = quick < 0 ? checkUpdate(update) : update as Document
  checkOptions(options, 'update')
  if (Array.isArray(u) && options?.arrayFilters !== undefined) {
    // the server refuses arrayFilters on a pipeline-style update
    throw new InvalidWriteError('arrayFilters cannot be used with an update pipeline')
  }
  const bytes = sizeOf('filter', f, IN_FILTER) + (quick < 0 ? sizeOf('update', u, IN_UPDATE) : quick)
  const body: WriteBody = { filter: f, update: u }
  const extra = options === undefined ? 0 : copyExtras(body, options, 'update')
  const kind: Kind = many ? UPDATE_MANY : UPDATE_ONE
  checkStatement('update statement (filter, update, options)', kind, body, bytes + extra)
  return unique(new WriteOp(kind, many ? { updateMany: body as never } : { updateOne: body as never }, targetOf(f), bytes + extra, undefined, false), options)
}

export function buildReplace (filter: unknown, replacement: unknown, options: ReplaceOptions | undefined): WriteOp {
  const f = checkFilter(filter)
  if (!isDocument(replacement)) throw new InvalidWriteError(`replacement must be a plain object, got ${describe(replacement)}`)
  const quick = estimateSize(replacement, NO_OPERATOR_KEYS) // the key check and the size in one walk
  if (quick < 0) checkNoOperators('replacement', replacement)
  checkOptions(options, 'replace')
  const bytes = sizeOf('filter', f, IN_FILTER) + (quick < 0 ? sizeOf('replacement', replacement) : quick)
  const body: WriteBody = { filter: f, replacement }
  const extra = options === undefined ? 0 : copyExtras(body, options, 'replace')
  checkStatement('replace statement (filter, replacement, options)', REPLACE_ONE, body, bytes + extra)
  return unique(new WriteOp(REPLACE_ONE, { replaceOne: body as never }, targetOf(f), bytes + extra, undefined, false), options)
}

export function buildDelete (many: boolean, filter: unknown, options: DeleteOptions | undefined): WriteOp {
  const f = checkFilter(filter)
  checkOptions(options, 'delete')
  const bytes = sizeOf('filter', f, IN_FILTER)
  const body: WriteBody = { filter: f }
  const extra = options === undefined ? 0 : copyExtras(body, options, 'delete')
  const kind: Kind = many ? DELETE_MANY : DELETE_ONE
  checkStatement('delete statement (filter, options)', kind, body, bytes + extra)
  return unique(new WriteOp(kind, many ? { deleteMany: body as never } : { deleteOne: body as never }, targetOf(f), bytes + extra, undefined, false), options)
}

function unique (op: WriteOp, options: { uniqueFilter?: boolean } | undefined): WriteOp {
  if (options?.uniqueFilter === true) op.declareUniqueFilter()
  return op
}

/**
 * Copies the options (checked) a kind of write sends into its model; unknown keys, and known
 * ones the kind does not take (upsert on a delete), are left out as the driver would.
 * Returns the estimated size of the copied documents (for checkStatement).
 */
function copyExtras (body: WriteBody, options: UpdateOptions, set: OptionSet): number {
  let bytes = 0
  if (set !== 'delete' && options.upsert !== undefined) body.upsert = options.upsert
  if (set === 'update' && options.arrayFilters !== undefined) {
    body.arrayFilters = options.arrayFilters
    bytes += sizeOf('arrayFilters', options.arrayFilters, IN_FILTER)
  }
  if (options.collation !== undefined) {
    body.collation = options.collation
    bytes += sizeOf('collation', options.collation)
  }
  if (options.hint !== undefined) {
    body.hint = options.hint
    bytes += typeof options.hint === 'string' ? 5 + 3 * options.hint.length : sizeOf('hint', options.hint)
  }
  return bytes
}
