import { targetOfId } from '../write/target.js'
import { equalsScalar, isExactScalar } from './bson-values.js'

/** A field value an index cannot key (a type equality is not decided for): listed for every lookup of its field. */
export const UNKNOWN = '?'

/** `v` as the driver encodes it (issue 25 makes this real; for now: as given). */
export function wellFormed<T> (v: T): T {
  return v
}

/** The key of a value (write/target.ts#targetOfId). */
export function keyOf (v: unknown): string {
  return targetOfId(v)
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
