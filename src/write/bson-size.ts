import { BSON, ObjectId } from 'mongodb'
import { BAD_DATES, CODE_VALUES, FILTER_VALUES, findUnsendable } from './unsendable.js'
import { plainPrototype } from './write-options.js'

/**
 * BSON size of a document, estimated once per write (the batch byte budget and the 16 MiB
 * check need it). A plain JS walk costs a fraction of BSON.calculateObjectSize on the small
 * documents of a hot path. Never short: short strings and keys are counted at 3 bytes per
 * UTF-16 unit (what any UTF-8 takes at most), long strings exactly, every number as 8. So a
 * batch's estimate bounds its real size, and a batch the Dispatcher keeps under maxBatchBytes
 * (≤ 15 MiB) is never split by the driver into two commands (it splits at 16 MiB). Anything
 * estimated over 4 MiB, and anything the walk cannot read (toBSON, Map, unknown BSON types),
 * is measured exactly instead; so is what may not be sent as written (an invalid Date; in a
 * filter, a function, a Symbol, undefined), which the exact path names (bsonSize throws).
 * Throws a RangeError on cyclic or absurdly deep values.
 */
export const EXACT_ABOVE = 4 * 1024 * 1024
/**
 * Exact sizes count an `undefined` value as the driver sends it by default: as a null
 * (`ignoreUndefined: false`). BSON.calculateObjectSize alone would leave it out.
 */
const AS_SENT = { ignoreUndefined: false } as const
/**
 * Deeper values are refused at submit: the server refuses a command message nested past 200
 * levels as a whole (every write of the batch), and a statement sits a few levels inside it.
 */
const MAX_DEPTH = 180
const INT64_MAX = 2n ** 63n - 1n
const INT64_MIN = -(2n ** 63n)

class NeedsExact extends Error {}

/** `filter`: IN_FILTER when the value is (in) a filter, else 0. */
function valueSize (v: unknown, depth: number, filter: number): number {
  switch (typeof v) {
    // short strings: 3 bytes per UTF-16 unit bounds any UTF-8; long ones: measured exactly
    case 'string': return v.length < 64 ? 5 + 3 * v.length : 5 + Buffer.byteLength(v)
    case 'number': return 8
    case 'boolean': return 1
    // js-bson writes a BigInt as an int64 and silently wraps one outside its range
    case 'bigint': if (v > INT64_MAX || v < INT64_MIN) throw new RangeError(`${v}n is outside the int64 range`); return 8
    // in a filter, what BSON would not send as written is named by the exact path (unsendable.ts)
    case 'undefined': if ((filter & IN_FILTER) !== 0) throw new NeedsExact(); return 0
    case 'object': {
      if (v === null) return 0
      if (Array.isArray(v)) {
        if (depth > MAX_DEPTH) throw new RangeError('value is cyclic or nested too deeply')
        let n = 5
        for (let i = 0; i < v.length; i++) n += 2 + String(i).length + valueSize(v[i], depth + 1, filter)
        return n
      }
      if (v instanceof Date) {
        // an invalid Date (NaN time) is sent as 1970-01-01: the exact path names it
        if (Number.isNaN(v.getTime())) throw new NeedsExact()
        return 8
      }
      if (v instanceof ObjectId) return 12
      // anything else typed (other BSON types, look-alikes from JSON, RegExp, buffers…)
      // is measured exactly by the serializer, which also rejects what it cannot encode
      if ((v as { _bsontype?: unknown })._bsontype !== undefined || v instanceof RegExp || ArrayBuffer.isView(v) ||
        v instanceof Map || typeof (v as { toBSON?: unknown }).toBSON === 'function') {
        throw new NeedsExact()
      }
      if (!plainPrototype(v)) return instanceSize(v as Record<string, unknown>, depth + 1, filter)
      return objectSize(v as Record<string, unknown>, depth + 1, filter)
    }
    default: if (filter !== 0) throw new NeedsExact(); return 0 // functions and symbols are not serialized: named in a filter or an update
  }
}

/**
 * A class instance as BSON sends it: its own fields (not what it inherits), its functions and
 * Symbols left out as its methods are (in an update too; in a filter they are refused: a field
 * left out selects more); the same checks as any value otherwise (depth, int64 range, in a
 * filter undefined).
 */
function instanceSize (v: Record<string, unknown>, depth: number, filter: number): number {
  if (depth > MAX_DEPTH) throw new RangeError('value is cyclic or nested too deeply')
  const keys = Object.keys(v)
  if (keys.length === 0 && filter !== 0) throw new NeedsExact() // sent as {} (its data in getters or #private fields): named (unsendable.ts)
  let n = 5
  for (const key of keys) {
    if (key.includes('\0')) throw new NeedsExact()
    const x: unknown = v[key]
    if (typeof x === 'function' || typeof x === 'symbol') {
      if ((filter & IN_FILTER) !== 0) throw new NeedsExact() // a filter losing a field selects more: named (unsendable.ts)
      continue
    }
    n += 2 + 3 * key.length + valueSize(x, depth, filter)
  }
  return n
}

/** estimateSize rule: no top-level key may start with `$` (a document, a replacement). */
export const NO_OPERATOR_KEYS = 1
/** estimateSize rule: leave the top-level `_id` out (the caller is about to give the document a new one). */
export const SKIP_ID = 2

/**
 * bsonSize rule: the value is a filter (or arrayFilters): a function, a Symbol or undefined in
 * it is refused, since BSON would not send it as written (unsendable.ts, FILTER_VALUES).
 */
export const IN_FILTER = 4
/**
 * bsonSize rule: the value is (in) an update. A function or a Symbol in it is refused too: BSON
 * leaves it out, so `$set: { a: fn }` would do nothing and `$pull: { items: { owner: fn } }`
 * would pull every element.
 */
export const IN_UPDATE = 8

/** `rules` apply to this level's keys only (IN_FILTER: to every level): nested objects are walked with IN_FILTER alone. */
function objectSize (doc: Record<string, unknown>, depth: number, rules = 0): number {
  if (depth > MAX_DEPTH) throw new RangeError('value is cyclic or nested too deeply')
  const filter = rules & (IN_FILTER | IN_UPDATE)
  let n = 5
  for (const key in doc) {
    // a NUL byte in a key is not sendable: the exact path finds and names it
    if (key.includes('\0')) throw new NeedsExact()
    if ((rules & (NO_OPERATOR_KEYS | SKIP_ID)) !== 0) {
      if ((rules & NO_OPERATOR_KEYS) !== 0 && key.charCodeAt(0) === 36 /* $ */) throw new NeedsExact()
      if ((rules & SKIP_ID) !== 0 && key === '_id') continue
    }
    n += 2 + 3 * key.length + valueSize(doc[key], depth, filter)
  }
  return n
}

/**
 * bsonSize's estimate on the hot path, with build-op's checks of the top-level keys made in
 * the same walk (`rules`). Returns -1 wherever bsonSize would not settle for the estimate (a
 * value it measures exactly, a NUL key, nesting too deep, over EXACT_ABOVE), a key breaks a
 * rule, or reading the document throws: the caller then makes its checks and calls bsonSize
 * one by one, which name the problem. Never throws.
 */
export function estimateSize (doc: object, rules: number): number {
  let n: number
  try {
    n = objectSize(doc as Record<string, unknown>, 0, rules)
  } catch {
    return -1
  }
  return n > EXACT_ABOVE ? -1 : n
}

/** bsonSize's estimate of one field's value (the field itself not counted), or -1 as for estimateSize. Never throws. */
export function estimateValueSize (v: unknown, rules = 0): number {
  try {
    return valueSize(v, 0, rules & (IN_FILTER | IN_UPDATE))
  } catch {
    return -1
  }
}

/**
 * `rules`: IN_FILTER or 0. Throws a TypeError naming the path of a value the driver cannot
 * send, or would send as something else than written (an invalid Date; in a filter, a
 * function, a Symbol, undefined).
 */
export function bsonSize (doc: object, rules = 0): number {
  let n: number
  try {
    // a filter or an update given as a class instance: checked as one, on the exact path below
    if ((rules & (IN_FILTER | IN_UPDATE)) !== 0 && !plainPrototype(doc)) throw new NeedsExact()
    n = objectSize(doc as Record<string, unknown>, 0, rules)
  } catch (err) {
    if (!(err instanceof NeedsExact)) throw err
    // the rare values the walk cannot read (RegExp, Map, toBSON, other BSON types, a NUL key,
    // an invalid Date, a filter's function…) are checked for what would not be sent as written
    const unsendable = findUnsendable(doc, '', (rules & IN_FILTER) !== 0 ? BAD_DATES | FILTER_VALUES : (rules & IN_UPDATE) !== 0 ? BAD_DATES | CODE_VALUES : BAD_DATES)
    if (unsendable !== undefined) throw new TypeError(unsendable)
    return exactBsonSize(doc)
  }
  return n > EXACT_ABOVE ? exactBsonSize(doc) : n
}

/** The exact size of `doc` serialized as the driver sends it. */
export function exactBsonSize (doc: object): number {
  return BSON.calculateObjectSize(doc, AS_SENT)
}
