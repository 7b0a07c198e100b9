import type { Document } from 'mongodb'
import { InvalidWriteError, describe } from '../errors.js'

/** Per-write options accepted by every write method. */
export interface WriteOptions {
  /** Drop the write if it has not been sent when this aborts (the caller gets WRITE_BUFFER_ABORTED). */
  signal?: AbortSignal
  /** Deadline for this write (queue wait + retries), overriding `writeTimeoutMs`. */
  timeoutMs?: number
  /**
   * Nobody awaits this write: the method returns undefined (no promise, nothing can go
   * unhandled) and a failure goes to the buffer's `onWriteError`. Bad input still throws.
   */
  detached?: boolean
  /**
   * An updateOne may wait up to this long (ms) for later writes to the same document to
   * coalesce into it; other writes are not held back. flush() and close() send it at once.
   */
  lingerMs?: number
}
/**
 * `uniqueFilter: true` declares that the filter matches at most one document (a unique index
 * covers it). Only then is an updateOne / replaceOne / deleteOne whose filter is not an `_id`
 * sent again after an attempt whose outcome is unknown: a resend on any other filter could
 * change a second document.
 */
export interface SingleTargetOptions { uniqueFilter?: boolean }
export interface UpdateOptions extends WriteOptions, SingleTargetOptions {
  upsert?: boolean
  arrayFilters?: Document[]
  collation?: Document
  hint?: string | Document
}
export type ReplaceOptions = Omit<UpdateOptions, 'arrayFilters'>
export interface DeleteOptions extends WriteOptions, SingleTargetOptions {
  collation?: Document
  hint?: string | Document
}

/** Any object BSON writes as an embedded document (a Map, a class instance…): fine as a value. */
export function isEmbeddable (v: unknown): v is Document {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Date) &&
    !ArrayBuffer.isView(v) && (v as { _bsontype?: unknown })._bsontype === undefined
}

/**
 * A literal object (prototype Object.prototype or null) without toBSON: its own fields, as
 * for..in and a spread see them, are exactly what BSON sends. A Map (BSON sends its entries),
 * a toBSON's return value or a class instance (own keys only) is not.
 */
export function isPlain (v: unknown): v is Document {
  if (typeof v !== 'object' || v === null) return false
  return plainPrototype(v) && typeof (v as { toBSON?: unknown }).toBSON !== 'function'
}

/** An object literal's prototype (or none): not a class instance, whose inherited and private state BSON does not send. */
export function plainPrototype (v: object): boolean {
  const proto: unknown = Object.getPrototypeOf(v)
  return proto === Object.prototype || proto === null
}

/**
 * A document, filter, replacement or update as the buffer reads it: an object whose own
 * fields are what BSON sends. Not a Map (BSON sends its entries, not the `_id` or `$`-keys the
 * buffer checks), a RegExp (sent as a regex), a boxed primitive or a Promise (sent as `{}`: a
 * filter that matches everything), nor an object with `toBSON` (sent as whatever it returns).
 */
export function isDocument (v: unknown): v is Document {
  // the common case, a literal: one prototype read
  if (isPlain(v)) return (v as { _bsontype?: unknown })._bsontype === undefined
  if (typeof v !== 'object' || v === null) return false
  const d = v as { toBSON?: unknown }
  return isEmbeddable(v) && !(v instanceof Map) && !(v instanceof Set) && !(v instanceof RegExp) && !(v instanceof Promise) &&
    !(v instanceof Number) && !(v instanceof String) && !(v instanceof Boolean) && typeof d.toBSON !== 'function'
}

export type OptionSet = 'insert' | 'update' | 'replace' | 'delete'

/** An AbortSignal from another realm or polyfill: what the buffer uses of one, readable. */
function abortSignalLike (v: unknown): boolean {
  if (typeof v !== 'object' || v === null) return false
  const s = v as { addEventListener?: unknown, removeEventListener?: unknown, aborted?: unknown }
  return typeof s.addEventListener === 'function' && typeof s.removeEventListener === 'function' && typeof s.aborted === 'boolean'
}

/**
 * What a write's options may hold. Options of another kind of write (upsert on a delete) are
 * left out, as the driver does; a key none takes is refused, where the driver would ignore it:
 * a typo (`upsrt`), or a driver option a batch cannot honour per write (`session`,
 * `writeConcern`: one batch is one command of many callers).
 */
const WRITE_OPTION_KEYS = new Set(['signal', 'timeoutMs', 'detached', 'lingerMs', 'upsert', 'uniqueFilter', 'arrayFilters', 'collation', 'hint'])
/** the longest timeoutMs, as writeTimeoutMs's: a day (a timer past 2^31 − 1 ms would fire at once) */
const MAX_TIMEOUT_MS = 86_400_000

export function checkOptions (input: WriteOptions | undefined, set: OptionSet): void {
  const options: unknown = input
  if (options === undefined) return
  if (typeof options !== 'object' || options === null) throw new InvalidWriteError(`options must be an object, got ${describe(options)}`)
  for (const key in options) {
    // a key set to undefined says nothing (a helper passing `{ session }` with none)
    if (!WRITE_OPTION_KEYS.has(key) && (options as Record<string, unknown>)[key] !== undefined) {
      throw new InvalidWriteError(`unknown write option ${JSON.stringify(key)}: a write takes ${[...WRITE_OPTION_KEYS].join(', ')}` +
        ' (writeConcern is the buffer\'s; sessions and transactions need the driver)')
    }
  }
  const { signal, timeoutMs, detached, lingerMs } = options as { signal?: unknown, timeoutMs?: unknown, detached?: unknown, lingerMs?: unknown }
  if (detached !== undefined && typeof detached !== 'boolean') throw new InvalidWriteError(`detached must be a boolean, got ${describe(detached)}`)
  if (lingerMs !== undefined && (typeof lingerMs !== 'number' || !(lingerMs >= 0) || lingerMs > 60_000)) {
    throw new InvalidWriteError(`lingerMs must be a number from 0 to 60000, got ${describe(lingerMs)}`)
  }
  if (signal !== undefined && !(signal instanceof AbortSignal) && !abortSignalLike(signal)) {
    throw new InvalidWriteError(`signal must be an AbortSignal, got ${describe(signal)}`)
  }
  if (timeoutMs !== undefined && (typeof timeoutMs !== 'number' || !(timeoutMs > 0) || timeoutMs > MAX_TIMEOUT_MS)) {
    throw new InvalidWriteError(`timeoutMs must be a positive number up to ${MAX_TIMEOUT_MS} (a day), got ${describe(timeoutMs)}`)
  }
  const upsert = (options as UpdateOptions).upsert
  if (upsert !== undefined && typeof upsert !== 'boolean') throw new InvalidWriteError(`upsert must be a boolean, got ${describe(upsert)}`)
  const uniqueFilter = (options as SingleTargetOptions).uniqueFilter
  if (uniqueFilter !== undefined && (typeof uniqueFilter !== 'boolean' || set === 'insert')) {
    throw new InvalidWriteError(`uniqueFilter must be a boolean (updates, replaceOne, deletes), got ${describe(uniqueFilter)}`)
  }
  if (set !== 'insert') checkCommandOptions(options, set)
}

/**
 * arrayFilters, collation and hint travel inside the write's statement: a value of the wrong
 * shape would make the server refuse the whole update/delete command, i.e. every write of
 * the batch. Their types are checked here; what only the server can judge (an identifier
 * no path uses, an unknown locale or index) is refused by it for that write alone.
 */
function checkCommandOptions (options: UpdateOptions, set: OptionSet): void {
  const { arrayFilters, collation, hint } = options as { arrayFilters?: unknown, collation?: unknown, hint?: unknown }
  if (arrayFilters !== undefined && set === 'update') {
    if (!Array.isArray(arrayFilters)) throw new InvalidWriteError(`arrayFilters must be an array of plain objects, got ${describe(arrayFilters)}`)
    for (let i = 0; i < arrayFilters.length; i++) {
      const filter: unknown = arrayFilters[i]
      if (!isDocument(filter)) throw new InvalidWriteError(`arrayFilters[${i}] must be a plain object, got ${describe(filter)}`)
    }
  } else if (arrayFilters !== undefined && set === 'replace') {
    // the server refuses arrayFilters on a replacement-style update
    throw new InvalidWriteError(`arrayFilters cannot be used with replaceOne, got ${describe(arrayFilters)}`)
  }
  if (collation !== undefined) {
    if (!isDocument(collation) || !('locale' in collation)) {
      throw new InvalidWriteError(`collation must be a plain object with a string locale, got ${describe(collation)}`)
    }
    const locale: unknown = collation.locale
    if (typeof locale !== 'string' || locale === '') throw new InvalidWriteError(`collation.locale must be a non-empty string, got ${describe(locale)}`)
  }
  // '' would not even be sent (the driver tests `if (hint)`): the caller meant something else
  if (hint !== undefined && !(typeof hint === 'string' && hint !== '') && !isDocument(hint)) {
    throw new InvalidWriteError(`hint must be an index name or an index spec object, got ${describe(hint)}`)
  }
}
