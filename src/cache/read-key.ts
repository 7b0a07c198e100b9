import { BSON } from 'mongodb'
import type { Document, FindOptions } from 'mongodb'
import { targetOf } from '../write/target.js'
import { hasUndefined } from './bson-values.js'
import { equalities, type Filter } from './filter-facts.js'

/**
 * The key of a cacheable read: collection, canonical filter and projection, length-prefixed
 * so that no filter value can forge another filter's (or projection's) key. A projection is
 * keyed by its bytes, key order kept: computed fields come back in projection order, so
 * `{ y: '$b', x: '$a' }` and `{ x: '$a', y: '$b' }` are two reads.
 */
export function readKey (name: string, filter: Filter, projection: Document | undefined): string {
  const filterKey = targetOf(filter)
  const proj = projection === undefined ? '' : Buffer.from(BSON.serialize(projection, { serializeFunctions: true })).toString('latin1')
  return `${name.length}:${name}${filterKey.length}:${filterKey}${proj}`
}

/**
 * Only filter + projection make a cached read: anything else (sort, skip, collation, BSON
 * options…) goes to the server; so does a projection that is not a document or holds
 * undefined (sent as null or left out, by the client's ignoreUndefined: not one key).
 */
export function cacheable (filter: Filter, options: FindOptions | undefined): boolean {
  if (options !== undefined) {
    for (const k in options) if (k !== 'projection' && (options as Record<string, unknown>)[k] !== undefined) return false
    const projection: unknown = options.projection
    if (projection !== undefined && (typeof projection !== 'object' || projection === null || Array.isArray(projection) || hasUndefined(projection))) return false
  }
  return equalities(filter) !== undefined
}

/**
 * Whether a projection shows the document's own `_id`: a plain object where `_id` is absent
 * (shown by default), 1 or true, and no `_id.…` path reshapes it. `{ _id: 0 }` leaves it out;
 * `{ _id: '$email' }` or a literal computes another value.
 */
export function showsId (projection: Document): boolean {
  const proto: unknown = Object.getPrototypeOf(projection)
  if (proto !== Object.prototype && proto !== null) return false
  for (const k in projection) {
    if (k === '_id') {
      const v: unknown = projection[k]
      if (v !== 1 && v !== true) return false
    } else if (k.startsWith('_id.')) {
      return false
    }
  }
  return true
}
