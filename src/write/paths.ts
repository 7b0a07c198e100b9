import type { Document } from 'mongodb'

/** `a` and `a.b` (or equal paths) address overlapping parts of a document. */
export function overlaps (a: string, b: string): boolean {
  if (a === b) return true
  return a.length < b.length ? b.startsWith(a) && b.charCodeAt(a.length) === 46 : a.startsWith(b) && a.charCodeAt(b.length) === 46
}

/**
 * Whether an update document changes a field its filter tests, so that applying it again (a
 * retry) or applying a later write with the same filter (a merge) could select another
 * document. A filter with top-level operators ($or, $expr…) cannot be seen into: it counts.
 */
export function touchesFilter (filter: Document, update: Document): boolean {
  for (const f in filter) {
    if (f.charCodeAt(0) === 36) return true
    for (const operator in update) {
      for (const path in update[operator]) if (overlaps(path, f)) return true
    }
  }
  return false
}
