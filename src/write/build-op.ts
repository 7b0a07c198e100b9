import { ObjectId } from 'mongodb'
import type { Document } from 'mongodb'
import { bsonSize } from './bson-size.js'
import { InvalidWriteError, describe } from '../errors.js'
import { targetOf, targetOfId } from './target.js'
import {
  WriteOp, INSERT, UPDATE_ONE, UPDATE_MANY, REPLACE_ONE, DELETE_ONE, DELETE_MANY, type Kind,
} from './write-op.js'

/** Per-write options accepted by every write method. */
export interface WriteOptions {
  /** Drop the write if it has not been sent when this aborts (the caller gets WRITE_BUFFER_ABORTED). */
  signal?: AbortSignal
  /** Deadline for this write (queue wait + retries), overriding `writeTimeoutMs`. */
  timeoutMs?: number
}
export interface UpdateOptions extends WriteOptions {
  upsert?: boolean
  arrayFilters?: Document[]
  collation?: Document
  hint?: string | Document
}
export type ReplaceOptions = Omit<UpdateOptions, 'arrayFilters'>
export interface DeleteOptions extends WriteOptions {
  collation?: Document
  hint?: string | Document
}

const MAX_BSON_BYTES = 16 * 1024 * 1024

function isDocument (v: unknown): v is Document {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Date) &&
    !ArrayBuffer.isView(v) && (v as { _bsontype?: unknown })._bsontype === undefined
}

function sizeOf (what: string, value: Document): number {
  let n: number
  try {
    n = bsonSize(value)
  } catch (err) {
    throw new InvalidWriteError(`${what} cannot be serialized to BSON (${(err as Error).message}): ${describe(value)}`)
  }
  if (n > MAX_BSON_BYTES) throw new InvalidWriteError(`${what} is ${n} bytes, over the 16 MiB BSON document limit`)
  return n
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

function checkUpdate (update: unknown): Document | Document[] {
  if (Array.isArray(update)) {
    if (update.length === 0) throw new InvalidWriteError('update pipeline must not be empty')
    for (const stage of update) {
      if (!isDocument(stage) || !hasOnlyOperators(stage)) {
        throw new InvalidWriteError(`update pipeline stage must be an object of $-operators, got ${describe(stage)}`)
      }
    }
    return update as Document[]
  }
  if (!isDocument(update)) throw new InvalidWriteError(`update must be an object of update operators, got ${describe(update)}`)
  if (!hasOnlyOperators(update)) {
    throw new InvalidWriteError(`update must contain only update operators ($set, $inc, ...), got ${describe(update)}`)
  }
  for (const op in update) {
    const arg: unknown = update[op]
    if (!isDocument(arg)) throw new InvalidWriteError(`update operator ${op} needs an object, got ${describe(arg)}`)
  }
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

function checkOptions (input: WriteOptions | undefined): void {
  const options: unknown = input
  if (options === undefined) return
  if (typeof options !== 'object' || options === null) throw new InvalidWriteError(`options must be an object, got ${describe(options)}`)
  const { signal, timeoutMs } = options as { signal?: unknown, timeoutMs?: unknown }
  if (signal !== undefined && (typeof signal !== 'object' || signal === null || typeof (signal as AbortSignal).addEventListener !== 'function')) {
    throw new InvalidWriteError(`signal must be an AbortSignal, got ${describe(signal)}`)
  }
  if (timeoutMs !== undefined && (typeof timeoutMs !== 'number' || !(timeoutMs > 0) || !Number.isFinite(timeoutMs))) {
    throw new InvalidWriteError(`timeoutMs must be a positive number, got ${describe(timeoutMs)}`)
  }
  const upsert = (options as UpdateOptions).upsert
  if (upsert !== undefined && typeof upsert !== 'boolean') throw new InvalidWriteError(`upsert must be a boolean, got ${describe(upsert)}`)
}

export function buildInsert (doc: unknown, options: WriteOptions | undefined): WriteOp {
  if (!isDocument(doc)) throw new InvalidWriteError(`document must be a plain object, got ${describe(doc)}`)
  checkOptions(options)
  checkNoOperators('document', doc)
  let ownId = false
  // Assigned before queuing (as the driver does) so the caller knows the _id at once,
  // and so a retried insert is recognisable: its _id can only collide with itself.
  if (doc._id === undefined) {
    doc._id = new ObjectId()
    ownId = true
  }
  const bytes = sizeOf('document', doc)
  // a generated _id's target is computed only if ever needed; a caller's _id is checked now
  let target: string | null = null
  if (!ownId) {
    try {
      target = targetOfId(doc._id)
    } catch (err) {
      throw new InvalidWriteError(`_id cannot be serialized to BSON (${(err as Error).message}): ${describe(doc._id)}`)
    }
  }
  return new WriteOp(INSERT, { insertOne: { document: doc } }, target, bytes, doc._id, ownId)
}

export function buildUpdate (many: boolean, filter: unknown, update: unknown, options: UpdateOptions | undefined): WriteOp {
  const f = checkFilter(filter)
  const u = checkUpdate(update)
  checkOptions(options)
  const bytes = sizeOf('filter', f) + sizeOf('update', u)
  const body: Document = { filter: f, update: u }
  if (options !== undefined) copyExtras(body, options)
  const kind: Kind = many ? UPDATE_MANY : UPDATE_ONE
  return new WriteOp(kind, many ? { updateMany: body as never } : { updateOne: body as never }, targetOf(f), bytes, undefined, false)
}

export function buildReplace (filter: unknown, replacement: unknown, options: ReplaceOptions | undefined): WriteOp {
  const f = checkFilter(filter)
  if (!isDocument(replacement)) throw new InvalidWriteError(`replacement must be a plain object, got ${describe(replacement)}`)
  checkNoOperators('replacement', replacement)
  checkOptions(options)
  const bytes = sizeOf('filter', f) + sizeOf('replacement', replacement)
  const body: Document = { filter: f, replacement }
  if (options !== undefined) copyExtras(body, options)
  return new WriteOp(REPLACE_ONE, { replaceOne: body as never }, targetOf(f), bytes, undefined, false)
}

export function buildDelete (many: boolean, filter: unknown, options: DeleteOptions | undefined): WriteOp {
  const f = checkFilter(filter)
  checkOptions(options)
  const bytes = sizeOf('filter', f)
  const body: Document = { filter: f }
  if (options !== undefined) copyExtras(body, options)
  return new WriteOp(many ? DELETE_MANY : DELETE_ONE, many ? { deleteMany: body as never } : { deleteOne: body as never },
    targetOf(f), bytes, undefined, false)
}

function copyExtras (body: Document, options: UpdateOptions): void {
  if (options.upsert !== undefined) body.upsert = options.upsert
  if (options.arrayFilters !== undefined) body.arrayFilters = options.arrayFilters
  if (options.collation !== undefined) body.collation = options.collation
  if (options.hint !== undefined) body.hint = options.hint
}
