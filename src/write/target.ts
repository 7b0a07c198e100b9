/**
 * "Same target" = same collection and same canonical filter. An insert's target is
 * `{ _id: doc._id }`, so an insert and a later `updateOne({ _id })` of that document
 * keep their order too. Canonical means key order inside the filter does not matter
 * (`{a, b}` ≡ `{b, a}`); this can only group more writes together, never fewer, so it
 * errs on the safe side. Two *different* filters that happen to hit one document are
 * not the same target: use `ordered: true` on the collection for those.
 */

import { BSON } from 'mongodb'
import { wellFormedString } from './wire-string.js'

interface BsonLike { _bsontype?: unknown, toHexString?: () => string }

/**
 * A number's key is its exact value: an integral one as its exact integer (`String` rounds
 * past 2^53: 2**60 prints as 1152921504606847000, the text of another int64), so int32 1,
 * Long 1 and double 1.0 (equal in a query) share a key and unequal numbers never do. A
 * fraction prints exactly (the shortest text that reads back as the same double).
 */
function numberKey (n: number): string {
  return Number.isSafeInteger(n) || !Number.isInteger(n) ? 'n' + String(n) : 'n' + BigInt(n).toString()
}

/**
 * A Decimal128's key in the same space (the server compares it with numbers by value: 1.0 is
 * 1): an integral one as its exact integer, like a Long or an integral double; a fraction that
 * some double equals exactly (0.5) as that double's key; any other (0.1, which no double is) a
 * key of its own, `m<digits>e<exponent>` with no trailing zeros (0.10 and 0.1 are one value),
 * that no number shares: `{k: Decimal128('0.1')}` and `{k: 0.1}` select different documents.
 */
function decimalKey (text: string): string {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:E([+-]\d+))?$/.exec(text)
  if (m === null) return numberKey(Number(text)) // NaN, Infinity
  let digits = (m[2] as string) + (m[3] ?? '')
  let exponent = Number(m[4] ?? 0) - (m[3]?.length ?? 0)
  while (digits.length > 1 && digits.endsWith('0')) { digits = digits.slice(0, -1); exponent++ }
  digits = digits.replace(/^0+(?=\d)/, '')
  if (digits === '0') return 'n0' // -0, 0E-10: zero
  if (exponent >= 0 && exponent <= 400) return 'n' + (BigInt((m[1] as string) + digits) * 10n ** BigInt(exponent)).toString()
  const own = 'm' + (m[1] as string) + digits + 'e' + String(exponent)
  if (exponent > 0 || exponent < -1100) return own // past any double (or none at all): no number equals it
  const double = Number(text)
  return equalsDouble(BigInt(digits), -exponent, Math.abs(double)) ? numberKey(double) : own
}

/** Whether digits × 10^-scale is exactly the finite double `x` (positive; fractions only). */
function equalsDouble (digits: bigint, scale: number, x: number): boolean {
  if (!Number.isFinite(x) || x === 0) return false
  // x = mantissa × 2^-shift exactly; then digits / 10^scale = mantissa / 2^shift ⇔ digits × 2^shift = mantissa × 10^scale
  let mantissa = x
  let shift = 0
  while (!Number.isInteger(mantissa)) { mantissa *= 2; shift++ }
  return digits * (1n << BigInt(shift)) === BigInt(mantissa) * 10n ** BigInt(scale)
}

function scalarKey (v: unknown): string | undefined {
  switch (typeof v) {
    // as the driver sends it: a lone surrogate is U+FFFD on the wire, so '\uD800' and '\uFFFD' are one document
    case 'string': return 's' + wellFormedString(v)
    case 'number': return numberKey(v)
    case 'boolean': return v ? 'T' : 'F'
    case 'bigint': return 'n' + String(v)
    case 'object': {
      if (v === null) return 'z'
      const b = v as BsonLike
      if (b._bsontype === 'ObjectId' && typeof b.toHexString === 'function') return 'o' + b.toHexString()
      // one number, one key: 5, Int32(5), Long(5) and Double(5) select the same documents
      if (b._bsontype === 'Int32' || b._bsontype === 'Double') return numberKey((v as { value: number }).value)
      // an unsigned Long travels as its 64 bits: the server reads them as a signed int64
      if (b._bsontype === 'Long') {
        const long = v as { unsigned?: unknown, toString: () => string }
        return 'n' + (long.unsigned === true ? BigInt.asIntN(64, BigInt(long.toString())).toString() : long.toString())
      }
      if (b._bsontype === 'Decimal128') return decimalKey((v as { toString: () => string }).toString())
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
    // Binary, BSONRegExp, Timestamp…: their canonical Extended JSON is exact (a Decimal128 is a number: scalarKey)
    return JSON.stringify('x' + BSON.EJSON.stringify({ v }, { relaxed: false }))
  }
  if (v instanceof Map) return canonicalMap(v, sortKeys)
  const toBSON = (v as { toBSON?: unknown }).toBSON
  if (typeof toBSON === 'function') {
    // what is sent (a write whose toBSON throws is refused at submit: bson-size.ts, unsendable.ts)
    let sent: unknown = v
    try { sent = (toBSON as () => unknown).call(v) } catch {}
    if (sent !== v) return canonical(sent, sortKeys)
  }
  let keys = Object.keys(v)
  if (sortKeys || (keys.length > 0 && (keys[0] as string).charCodeAt(0) === 36)) keys = keys.sort()
  let out = '{'
  for (const k of keys) out += JSON.stringify(wellFormedString(k)) + ':' + canonical((v as Record<string, unknown>)[k], false) + ','
  return out + '}'
}

/** A Map is sent as a document of its entries, in their order (keys as strings). */
function canonicalMap (map: Map<unknown, unknown>, sortKeys: boolean): string {
  let entries = [...map].map(([k, item]) => [String(k), item] as const)
  if (sortKeys || (entries.length > 0 && (entries[0] as readonly [string, unknown])[0].charCodeAt(0) === 36)) entries = entries.sort((a, b) => a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)
  let out = '{'
  for (const [k, item] of entries) out += JSON.stringify(wellFormedString(k)) + ':' + canonical(item, false) + ','
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
