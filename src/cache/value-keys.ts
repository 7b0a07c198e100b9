import { targetOfId } from '../write/target.js'
import { equalsScalar, isExactScalar } from './bson-values.js'
import { wellFormedString, type WellFormedString } from '../write/wire-string.js'

/** A field value an index cannot key (a type equality is not decided for): listed for every lookup of its field. */
export const UNKNOWN = '?'

export { wellFormedString } from '../write/wire-string.js'

/** Whether a string, or any string or field name inside plain objects and arrays, is not well-formed. */
function illFormed (v: unknown): boolean {
  if (typeof v === 'string') return !(v as unknown as WellFormedString).isWellFormed()
  if (v === null || typeof v !== 'object') return false
  if (Array.isArray(v)) {
    for (const x of v) if (illFormed(x)) return true
    return false
  }
  if (!isPlain(v)) return false // a BSON value, a Date, a Buffer…: its strings are not the cache's keys
  for (const k in v) if (illFormed(k) || illFormed((v as Record<string, unknown>)[k])) return true
  return false
}

function isPlain (v: object): boolean {
  const proto: unknown = Object.getPrototypeOf(v)
  return proto === Object.prototype || proto === null
}

function fix (v: unknown): unknown {
  if (typeof v === 'string') return wellFormedString(v)
  if (v === null || typeof v !== 'object') return v
  if (Array.isArray(v)) return v.map(fix)
  if (!isPlain(v)) return v
  const out: Record<string, unknown> = {}
  for (const k in v) out[wellFormedString(k)] = fix((v as Record<string, unknown>)[k])
  return out
}

/**
 * `v` with every string and field name (in plain objects and arrays) as the driver encodes
 * it: `v` itself when nothing changes (the common case costs one walk, no copy).
 */
export function wellFormed<T> (v: T): T {
  return illFormed(v) ? fix(v) as T : v
}

/** The key of a value (write/target.ts#targetOfId), strings taken as the driver encodes them. */
export function keyOf (v: unknown): string {
  return targetOfId(typeof v === 'string' ? wellFormedString(v) : v)
}

/** Index keys of a field value: its own, each array element's, or UNKNOWN where equality is not decided. */
export function valueKeys (value: unknown): string[] {
  const values = Array.isArray(value) ? value : [value]
  const keys: string[] = []
  for (const v of values) {
    if (isExactScalar(v)) keys.push(keyOf(v))
    else if (Array.isArray(v) || equalsScalar(v, '') === undefined) keys.push(UNKNOWN)
    // else: null, an embedded document…: equal to no scalar, nothing to list
  }
  return keys
}

/**
 * FNV-1a, 32 bits, of `field \0 key` (a key of valueKeys): how the cache bus names "field now
 * holds value" without sending the value. A collision only drops an entry too many.
 */
export function valueHash (field: string, key: string): number {
  let h = 0x811c9dc5
  for (let i = 0; i < field.length; i++) h = Math.imul(h ^ field.charCodeAt(i), 0x01000193)
  h = Math.imul(h, 0x01000193) // the separator (\0)
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193)
  return h >>> 0
}
