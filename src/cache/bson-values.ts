/**
 * The server's equality and arithmetic on the BSON values the cache handles exactly, and
 * nothing else: a value of any other type is "unknown" (undefined), and the cache then asks
 * the server instead of guessing.
 *
 * Equality is BSON-type first: numbers (int32, int64, double) compare by value across their
 * types; strings by their bytes; ObjectId, Date, Boolean, Binary (subtype and bytes) by value;
 * values of different types are never equal (an ObjectId never equals its hex string).
 */

import { BSON } from 'mongodb'
import { isEmbeddable } from '../write/write-options.js'

interface Bson { _bsontype?: unknown }

const VERSION = Symbol.for('@@mdb.bson.version')
/** The BSON major version of the library the driver serializes with (a BSON value of another one is refused by it). */
const BSON_MAJOR: unknown = (new BSON.ObjectId() as unknown as Record<symbol, unknown>)[VERSION]

/**
 * Whether the driver sends `v` as something else than `v` itself: a value with a `toBSON()`
 * method is sent as what it returns, and a BSON value of another major version is refused.
 * The cache never keys or compares such a value.
 */
export function transformed (v: unknown): boolean {
  if (v === null || v === undefined) return false
  if (typeof (v as { toBSON?: unknown }).toBSON === 'function') return true
  return typeof v === 'object' && typeof (v as Bson)._bsontype === 'string' && (v as Record<symbol, unknown>)[VERSION] !== BSON_MAJOR
}

type Numeric = { kind: 'int' | 'double', value: number } | { kind: 'long', value: bigint }

const INT32_MIN = -(2 ** 31)
const INT32_MAX = 2 ** 31 - 1
const INT64_MIN = -(2n ** 63n)
const INT64_MAX = 2n ** 63n - 1n

/**
 * A number's BSON reading: a JS number is serialized as int32 when it is one, else double
 * (-0 too: js-bson writes it as a double, keeping its sign).
 */
export function numeric (v: unknown): Numeric | undefined {
  if (typeof v === 'number') {
    if (Number.isNaN(v)) return undefined
    return Number.isInteger(v) && v >= INT32_MIN && v <= INT32_MAX && !Object.is(v, -0) ? { kind: 'int', value: v } : { kind: 'double', value: v }
  }
  if (typeof v === 'bigint') return { kind: 'long', value: v }
  if (typeof v !== 'object' || v === null) return undefined
  const t = (v as Bson)._bsontype
  if (t === 'Int32') return { kind: 'int', value: (v as { value: number }).value }
  if (t === 'Double') {
    const value = (v as { value: number }).value
    return Number.isNaN(value) ? undefined : { kind: 'double', value }
  }
  // an unsigned Long travels as its 64 bits: the server reads them as a signed int64
  if (t === 'Long') return { kind: 'long', value: BigInt.asIntN(64, BigInt((v as { toString: () => string }).toString())) }
  return undefined
}

function numbersEqual (a: Numeric, b: Numeric): boolean {
  if (a.kind === 'long' || b.kind === 'long') {
    const x = a.kind === 'long' ? a.value : Number.isInteger(a.value) ? BigInt(a.value) : undefined
    const y = b.kind === 'long' ? b.value : Number.isInteger(b.value) ? BigInt(b.value) : undefined
    return x !== undefined && y !== undefined && x === y
  }
  return a.value === b.value
}

/** Whether `v` is a value this module decides equality for. */
export function isExactScalar (v: unknown): boolean {
  if (transformed(v)) return false
  switch (typeof v) {
    case 'string': case 'boolean': return true
    case 'number': return !Number.isNaN(v)
    case 'bigint': return true
    case 'object': {
      if (v === null) return false // `{a: null}` also matches a missing field: not simple equality
      if (v instanceof Date) return !Number.isNaN(v.getTime())
      const t = (v as Bson)._bsontype
      return t === 'ObjectId' || t === 'Binary' || numeric(v) !== undefined
    }
    default: return false
  }
}

/**
 * Equality of a document's value with an exact scalar (see isExactScalar): true, false, or
 * undefined when the document holds something this module does not compare (then the cache
 * must not decide).
 */
export function equalsScalar (docValue: unknown, scalar: unknown): boolean | undefined {
  const n = numeric(scalar)
  if (n !== undefined) {
    const m = numeric(docValue)
    if (m !== undefined) return numbersEqual(m, n)
    return knownOtherType(docValue)
  }
  if (typeof scalar === 'string' || typeof scalar === 'boolean') {
    if (typeof docValue === typeof scalar) return docValue === scalar
    return knownOtherType(docValue)
  }
  if (scalar instanceof Date) {
    if (docValue instanceof Date) return docValue.getTime() === scalar.getTime()
    return knownOtherType(docValue)
  }
  const t = (scalar as Bson)._bsontype
  if ((docValue as Bson | null | undefined)?._bsontype === t) {
    if (t === 'ObjectId') return (docValue as { equals: (o: unknown) => boolean }).equals(scalar)
    if (t === 'Binary') {
      const a = docValue as { sub_type: number, buffer: Uint8Array }
      const b = scalar as { sub_type: number, buffer: Uint8Array }
      return a.sub_type === b.sub_type && Buffer.from(a.buffer).equals(Buffer.from(b.buffer))
    }
  }
  return knownOtherType(docValue)
}

/** A value of a type the comparison knows to be different: false; anything else: undefined. */
function knownOtherType (v: unknown): false | undefined {
  if (transformed(v)) return undefined
  if (v === undefined || v === null || typeof v === 'string' || typeof v === 'boolean' || typeof v === 'number' || typeof v === 'bigint') return false
  if (v instanceof Date) return false
  const t = (v as Bson)._bsontype
  if (t === 'ObjectId' || t === 'Binary' || t === 'Int32' || t === 'Double' || t === 'Long') return false
  if (typeof v === 'object' && t === undefined && !Array.isArray(v)) return false // an embedded document
  return undefined
}

/**
 * The server's `$inc`: int32 + int32 → int32 (int64 on overflow); with an int64 → int64; with a
 * double → double. A missing field is set to the operand as it is (a double -0 stays -0).
 */
export function increment (current: unknown, by: unknown): { kind: Numeric['kind'], value: number | bigint } | undefined {
  const b = numeric(by)
  if (b === undefined) return undefined
  if (current === undefined) return b
  const a = numeric(current)
  if (a === undefined) return undefined
  if (a.kind === 'double' || b.kind === 'double') return { kind: 'double', value: Number(a.value) + Number(b.value) }
  const sum = BigInt(a.value) + BigInt(b.value)
  if (a.kind === 'long' || b.kind === 'long' || sum < BigInt(INT32_MIN) || sum > BigInt(INT32_MAX)) {
    return sum < INT64_MIN || sum > INT64_MAX ? undefined : { kind: 'long', value: sum } // int64 overflow: the server refuses
  }
  return { kind: 'int', value: Number(sum) }
}

/**
 * The server's order of two values of one comparable kind — numbers of any BSON type, or two
 * Dates — negative when a < b; undefined for anything else (the cache then does not decide).
 */
export function compareExact (a: unknown, b: unknown): number | undefined {
  const x = numeric(a)
  const y = numeric(b)
  if (x !== undefined && y !== undefined) {
    if (x.kind !== 'long' && y.kind !== 'long') return x.value - y.value
    if (x.kind === 'double' && !Number.isInteger(x.value)) return undefined
    if (y.kind === 'double' && !Number.isInteger(y.value)) return undefined
    const d = BigInt(x.value) - BigInt(y.value)
    return d < 0n ? -1 : d > 0n ? 1 : 0
  }
  if (a instanceof Date && b instanceof Date) return a.getTime() - b.getTime()
  return undefined
}

/**
 * Whether a value holds anything the driver does not send as it is: `undefined` (sent as null,
 * or left out with ignoreUndefined) or a transformed value (a toBSON() method…), anywhere in
 * documents, arrays and Maps (not inside BSON values).
 */
export function hasUndefined (v: unknown): boolean {
  if (v === undefined || transformed(v)) return true
  if (Array.isArray(v)) {
    for (const x of v) if (hasUndefined(x)) return true
    return false
  }
  if (!isEmbeddable(v)) return false // a scalar, a Date, a Buffer, a BSON value
  if (v instanceof Map) {
    for (const x of v.values()) if (hasUndefined(x)) return true
    return false
  }
  for (const k in v) if (hasUndefined((v as Record<string, unknown>)[k])) return true
  return false
}
