/**
 * "Same target" = same collection and same canonical filter. An insert's target is
 * `{ _id: doc._id }`, so an insert and a later `updateOne({ _id })` of that document
 * keep their order too. Canonical means key order inside the filter does not matter
 * (`{a, b}` ≡ `{b, a}`); this can only group more writes together, never fewer, so it
 * errs on the safe side. Two *different* filters that happen to hit one document are
 * not the same target: use `ordered: true` on the collection for those.
 */

import { BSON } from 'mongodb'

interface BsonLike { _bsontype?: unknown, toHexString?: () => string }

function scalarKey (v: unknown): string | undefined {
  switch (typeof v) {
    case 'string': return 's' + v
    case 'number': return 'n' + String(v)
    case 'boolean': return v ? 'T' : 'F'
    case 'bigint': return 'n' + String(v)
    case 'object': {
      if (v === null) return 'z'
      const b = v as BsonLike
      if (b._bsontype === 'ObjectId' && typeof b.toHexString === 'function') return 'o' + b.toHexString()
      // one number, one key: 5, Int32(5), Long(5) and Double(5) select the same documents
      if (b._bsontype === 'Int32' || b._bsontype === 'Long' || b._bsontype === 'Double') return 'n' + (v as { toString: () => string }).toString()
      if (v instanceof Date) return 'd' + String(v.getTime())
      return undefined
    }
    default: return undefined
  }
}

/**
 * Keys are sorted at the top level of a filter and inside operator objects ({$gt, $lt}),
 * where order has no meaning; an embedded document keeps its order, since the server
 * matches `{a: {x: 1, y: 2}}` and `{a: {y: 2, x: 1}}` against different documents.
 */
function canonical (v: unknown, sortKeys: boolean): string {
  const s = scalarKey(v)
  if (s !== undefined) return JSON.stringify(s)
  if (typeof v !== 'object' || v === null) return JSON.stringify(String(v))
  if (Array.isArray(v)) return '[' + v.map(x => canonical(x, false)).join(',') + ']'
  if (v instanceof RegExp) return JSON.stringify('r' + String(v))
  const b = v as BsonLike
  if (typeof b._bsontype === 'string') {
    // Binary, Decimal128, BSONRegExp, Timestamp…: their canonical Extended JSON is exact
    return JSON.stringify('x' + BSON.EJSON.stringify({ v }, { relaxed: false }))
  }
  let keys = Object.keys(v)
  if (sortKeys || (keys.length > 0 && (keys[0] as string).charCodeAt(0) === 36)) keys = keys.sort()
  let out = '{'
  for (const k of keys) out += JSON.stringify(k) + ':' + canonical((v as Record<string, unknown>)[k], false) + ','
  return out + '}'
}

/** Target key for a filter; the common `{ _id: scalar }` case avoids any sorting or stringify. */
export function targetOf (filter: Record<string, unknown>): string {
  // for..in avoids allocating Object.keys() on the hot path
  let only: string | undefined
  let count = 0
  for (const k in filter) {
    only = k
    if (++count > 1) break
  }
  if (count === 1 && only === '_id') {
    const s = scalarKey(filter._id)
    if (s !== undefined) return s
  }
  return canonical(filter, true)
}

export function targetOfId (id: unknown): string {
  return scalarKey(id) ?? canonical({ _id: id }, true)
}
