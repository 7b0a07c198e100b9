import type { Document } from 'mongodb'
import siftImport from 'sift'
import { targetOf } from '../write/target.js'

/**
 * What can be told about filters and updates without asking the server: which fields they
 * touch, whether two filters can select the same document, whether a document matches.
 */

export type Filter = Document

export type Matcher = (doc: unknown) => boolean

// sift is CommonJS whose module.exports is the matcher factory itself: that is the default
// import at run time in both builds (ESM, and CommonJS through esModuleInterop), whatever its
// types say (they differ between the two module resolutions), so it is typed here.
const sift = siftImport as unknown as (query: Filter) => Matcher

/** Compiles a filter once; throws on an operator the matcher cannot follow. */
export function compile (filter: Filter): Matcher {
  return sift(filter)
}

/** Whether `doc` matches `filter`; an operator the matcher cannot evaluate answers "maybe". */
export function matches (filter: Filter, doc: unknown): boolean {
  try {
    return sift(filter)(doc)
  } catch {
    return true
  }
}

/** All top-level field names a filter mentions, at any depth of $and/$or/$nor ('$': anything). */
export function fieldsOf (filter: Filter, out: Set<string> = new Set()): Set<string> {
  for (const k in filter) {
    if (k === '$and' || k === '$or' || k === '$nor') {
      const list: unknown = filter[k]
      if (Array.isArray(list)) for (const f of list) if (f !== null && typeof f === 'object') fieldsOf(f as Filter, out)
    } else if (k.charCodeAt(0) !== 36) out.add(k.split('.')[0] as string)
    else out.add('$') // $where, $expr...: anything may matter
  }
  return out
}

/** Top-level fields an update may change; null when anything may (a pipeline). */
export function updatedRoots (update: Document | Document[] | undefined): Set<string> | null {
  if (update === undefined || Array.isArray(update)) return null
  const roots = new Set<string>()
  for (const op in update) for (const path in update[op]) roots.add(path.split('.')[0] as string)
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
