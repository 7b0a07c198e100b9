import { BSON } from 'mongodb'
import { plainPrototype } from './write-options.js'

/** findUnsendable's `mode`: also an invalid Date, which js-bson sends as 1970-01-01 (its NaN time written as 0). */
export const BAD_DATES = 1
/**
 * findUnsendable's `mode`: the value is a filter, so also a value BSON would not send as
 * written: a function or a Symbol (left out: `{ owner: fn }` goes as `{}`, every document)
 * or undefined as a field's value (sent as null, or left out on a client with ignoreUndefined:
 * its meaning would depend on the client; in an array it is always null).
 */
export const FILTER_VALUES = 2
/** findUnsendable's `mode`: the value is (in) an update, so also a function or a Symbol, which BSON leaves out. */
export const CODE_VALUES = 4
/** walk's own mode bit: below a class instance, whose functions and Symbols BSON leaves out as methods */
const IN_INSTANCE = 8

/**
 * What the driver's BSON serializer refuses to send, found before it is asked to: a NUL byte
 * in a key (BSON keys are C strings) or in a regular expression's pattern or flags. The
 * serializer throws at send time, for the whole bulkWrite (docs/server-behaviours.md: the driver serializes at send time); found at submit, the
 * write is refused alone, naming the path. Also used after a send-time serializer failure to
 * tell which writes of a batch cannot be sent (a document changed after submit). With `mode`
 * (BAD_DATES, FILTER_VALUES) also what it would send as something else than written: the
 * size walk (bson-size.ts) asks for them at submit, where they are refused.
 *
 * Walks what BSON walks: own enumerable keys of objects, arrays, Map entries, the value a
 * `toBSON()` returns. Returns a message naming the path, or undefined when all is sendable.
 */
export function findUnsendable (value: unknown, path = '', mode = 0): string | undefined {
  return walk(value, path, 0, mode)
}

const MAX_DEPTH = 200

function walk (v: unknown, path: string, depth: number, mode: number): string | undefined {
  if (typeof v !== 'object' || v === null) return (mode & (FILTER_VALUES | CODE_VALUES)) === 0 ? undefined : valueProblem(v, path, mode)
  if (depth > MAX_DEPTH) return undefined
  if (v instanceof RegExp) return regexProblem(v.source, v.flags, path)
  if (v instanceof Date) {
    return (mode & BAD_DATES) !== 0 && Number.isNaN(v.getTime()) ? `${where(path)}an invalid Date (its time is NaN) would be sent as 1970-01-01` : undefined
  }
  const bsontype = (v as { _bsontype?: unknown })._bsontype
  if (bsontype === 'BSONRegExp') {
    const r = v as BSON.BSONRegExp
    return regexProblem(r.pattern, r.options, path)
  }
  if (bsontype !== undefined || ArrayBuffer.isView(v)) return undefined
  const toBSON = (v as { toBSON?: unknown }).toBSON
  if (typeof toBSON === 'function') {
    let out: unknown
    try {
      out = (toBSON as () => unknown).call(v)
    } catch (err) {
      return `${where(path)}toBSON() threw (${(err as Error | null)?.message ?? String(err)})`
    }
    return out === v ? undefined : walk(out, path, depth + 1, mode)
  }
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const item: unknown = v[i]
      if (item === undefined) continue // sent as null, whatever the client's ignoreUndefined
      const found = walk(item, join(path, String(i)), depth + 1, mode)
      if (found !== undefined) return found
    }
    return undefined
  }
  if (v instanceof Map) {
    for (const [k, item] of v) {
      const found = keyProblem(String(k), path) ?? walk(item, join(path, String(k)), depth + 1, mode)
      if (found !== undefined) return found
    }
    return undefined
  }
  // own keys, as BSON sends them (Object.keys); a class instance's function-valued fields are
  // left out by BSON as its methods are: not refused below one (undefined in a filter still is)
  const plain = plainPrototype(v)
  const keys = Object.keys(v)
  if (!plain && keys.length === 0 && (mode & (FILTER_VALUES | CODE_VALUES)) !== 0) {
    // a class instance whose data is in getters or #private fields, a Set, a URL: BSON sends {}
    return `${path === '' ? 'the filter' : JSON.stringify(path)} is a ${(v as { constructor?: { name?: string } }).constructor?.name ?? 'class'} instance with no own fields: BSON sends it as {} (${(mode & FILTER_VALUES) !== 0 ? 'selecting documents it does not name' : 'doing something else than written'})`
  }
  const inner = plain ? mode : mode | IN_INSTANCE
  for (const k of keys) {
    const found = keyProblem(k, path) ?? walk((v as Record<string, unknown>)[k], join(path, k), depth + 1, inner)
    if (found !== undefined) return found
  }
  return undefined
}

/** A primitive value that BSON would not send as written: in a filter (FILTER_VALUES) or an update (CODE_VALUES). */
function valueProblem (v: unknown, path: string, mode: number): string | undefined {
  const filter = (mode & FILTER_VALUES) !== 0
  const at = path === '' ? (filter ? 'the filter' : 'the value') : JSON.stringify(path)
  if (typeof v === 'function' || typeof v === 'symbol') {
    if ((mode & IN_INSTANCE) !== 0 && !filter) return undefined // an instance's method, in an update: left out
    return `${at} is a ${typeof v === 'symbol' ? 'Symbol' : 'function'}, which BSON does not send: ${filter ? 'the filter would select documents it does not name' : 'the update would do something else than written'}`
  }
  if (v !== undefined || !filter) return undefined
  return `${at} is undefined: sent as null (matching a missing field), or left out on a client with ignoreUndefined (selecting documents the filter does not name); write null to match a missing field`
}

function keyProblem (key: string, path: string): string | undefined {
  return key.includes('\0') ? `key ${JSON.stringify(key)}${path === '' ? '' : ` in ${path}`} contains a NUL byte` : undefined
}

function regexProblem (pattern: string, flags: string, path: string): string | undefined {
  if (pattern.includes('\0')) return `${where(path)}regular expression pattern contains a NUL byte`
  if (flags.includes('\0')) return `${where(path)}regular expression flags contain a NUL byte`
  return undefined
}

function where (path: string): string { return path === '' ? '' : `${path}: ` }
function join (path: string, key: string): string { return path === '' ? key : `${path}.${key}` }
