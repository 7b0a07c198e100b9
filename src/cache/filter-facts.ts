import type { Document } from 'mongodb'
import { targetOf } from '../write/target.js'
import { equalsScalar, isExactScalar, transformed } from './bson-values.js'

/**
 * What the cache can decide about filters without asking the server — exactly, or not at all.
 *
 * The one filter shape it decides: a conjunction of top-level equalities, `{ f1: v1, f2: v2 }`,
 * each field name plain (no `$`, no dot) and each value an exact scalar (bson-values.ts). A
 * document matches when, for every field, its value equals the scalar or is an array with an
 * element equal to it — the server's rule. Every other filter (operators, dotted paths, null,
 * regular expressions, embedded documents; `$where`, `$expr`, `$function`, `$jsonSchema`) is
 * never evaluated here: the cache reads such filters through and treats writes with them as
 * possibly touching anything.
 */

export type Filter = Document

/** The filter's equalities when it has the one decidable shape, else undefined. */
export function equalities (filter: Filter): Array<[string, unknown]> | undefined {
  if (!isPlainDocument(filter)) return undefined
  const out: Array<[string, unknown]> = []
  for (const field in filter) {
    if (field.length === 0 || field.charCodeAt(0) === 36 /* $ */ || field.includes('.')) return undefined
    const value: unknown = filter[field]
    if (!isExactScalar(value)) return undefined
    out.push([field, value])
  }
  return out.length === 0 ? undefined : out
}

/**
 * Whether the driver sends `doc` as its own enumerable fields, the ones for..in visits: a
 * plain object (no class, whose inherited fields for..in would see and the driver would not),
 * without toBSON().
 */
export function isPlainDocument (doc: unknown): doc is Document {
  if (doc === null || typeof doc !== 'object' || transformed(doc)) return false
  const proto: unknown = Object.getPrototypeOf(doc)
  return proto === Object.prototype || proto === null
}

/** Whether `doc` matches `filter`: true / false, or undefined when it cannot be decided exactly. */
export function matches (filter: Filter, doc: Document | null | undefined): boolean | undefined {
  const eq = equalities(filter)
  if (eq === undefined || doc === null || doc === undefined) return undefined
  return matchesEqualities(eq, doc)
}

export function matchesEqualities (eq: Array<[string, unknown]>, doc: Document): boolean | undefined {
  let unknown = false
  for (const [field, scalar] of eq) {
    // own fields only: `constructor` or `toString` is not a field of a document without it
    const r = fieldEquals(Object.hasOwn(doc, field) ? doc[field] : undefined, scalar)
    if (r === false) return false
    if (r === undefined) unknown = true
  }
  return unknown ? undefined : true
}

function fieldEquals (value: unknown, scalar: unknown): boolean | undefined {
  if (!Array.isArray(value)) return equalsScalar(value, scalar)
  let unknown = false
  for (const element of value) {
    if (Array.isArray(element)) { unknown = true; continue } // nested arrays: not decided here
    const r = equalsScalar(element, scalar)
    if (r === true) return true
    if (r === undefined) unknown = true
  }
  return unknown ? undefined : false
}

/** Top-level fields a filter mentions, at any depth of $and/$or/$nor ('$': anything may matter). */
export function fieldsOf (filter: Filter, out: Set<string> = new Set()): Set<string> {
  for (const k in filter) {
    if (k === '$and' || k === '$or' || k === '$nor') {
      const list: unknown = filter[k]
      if (Array.isArray(list)) for (const f of list) if (f !== null && typeof f === 'object') fieldsOf(f as Filter, out)
    } else if (k.charCodeAt(0) !== 36) out.add(k.split('.')[0] as string)
    else out.add('$')
  }
  return out
}

/** Top-level fields an update may change ($rename: both names); null when anything may (a pipeline). */
export function updatedRoots (update: Document | Document[] | undefined): Set<string> | null {
  if (update === undefined || Array.isArray(update)) return null
  const roots = new Set<string>()
  for (const op in update) {
    const fields = update[op] as Document
    for (const path in fields) {
      roots.add(path.split('.')[0] as string)
      if (op === '$rename' && typeof fields[path] === 'string') roots.add((fields[path]).split('.')[0] as string)
    }
  }
  return roots
}

export function intersects (a: Set<string>, b: Set<string>): boolean {
  if (a.has('$') || b.has('$')) return true
  for (const x of a) if (b.has(x)) return true
  return false
}

function isOperatorObject (v: unknown): boolean {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return false
  const first = Object.keys(v)[0]
  return first !== undefined && first.charCodeAt(0) === 36
}

/**
 * Two filters that pin `_id` to different plain values cannot select the same document.
 * Only `_id`: any other field may hold an array, and `{tags: 'a'}` / `{tags: 'b'}` can
 * both match `{tags: ['a', 'b']}`.
 */
export function disjoint (a: Filter, b: Filter): boolean {
  if (!('_id' in a) || !('_id' in b)) return false
  const va: unknown = a._id
  const vb: unknown = b._id
  if (isOperatorObject(va) || isOperatorObject(vb)) return false
  return targetOf({ _id: va }) !== targetOf({ _id: vb })
}

/** The target of a filter that pins exactly one `_id` (`{ _id: scalar }`), else undefined. */
export function idKeyOf (filter: Filter): string | undefined {
  let n = 0
  for (const k in filter) { if (k !== '_id') return undefined; n++ }
  if (n !== 1 || !isExactScalar(filter._id)) return undefined
  return targetOf(filter)
}
