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
    const field = stem(f)
    for (const operator in update) {
      for (const path in update[operator]) if (overlaps(stem(path), field)) return true
    }
  }
  return false
}

/**
 * A path up to its first array position: `seats.$.free`, `arr.$[].v`, `arr.$[e].v` and
 * `arr.0.v` all stop at `seats` / `arr`. Past that part the path names elements the filter
 * picks (`$` is the element `seats.free` matched) or any element a filter on `arr.v` tests:
 * it changes what the filter selects however its remaining names compare.
 */
function stem (path: string): string {
  for (let i = path.indexOf('.'); i >= 0; i = path.indexOf('.', i + 1)) {
    const c = path.charCodeAt(i + 1)
    if (c === 36 /* $ */ || (c >= 48 && c <= 57)) return path.slice(0, i)
  }
  return path
}

/** A path of plain field names: none empty, none a `$` operator (positional `a.$`, `a.$[]`…). */
export function plainPath (path: string): boolean {
  for (const part of path.split('.')) if (part === '' || part.charCodeAt(0) === 36) return false
  return true
}

/**
 * Whether comparePaths gives the server's order for this path: no part starts with a digit
 * (MongoDB orders numeric names numerically), every character is ASCII.
 */
export function orderModelled (path: string): boolean {
  for (let i = 0; i < path.length; i++) {
    const c = path.charCodeAt(i)
    if (c > 0x7f || (c >= 48 && c <= 57 && (i === 0 || path.charCodeAt(i - 1) === 46))) return false
  }
  return true
}

/** The server's order of two update paths: name by name, by bytes (ASCII names: see orderModelled). */
export function comparePaths (a: string, b: string): number {
  const x = a.split('.')
  const y = b.split('.')
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const p = x[i] as string
    const q = y[i] as string
    if (p !== q) return p < q ? -1 : 1
  }
  return x.length - y.length
}

/**
 * The order in which one update creates new fields at these two paths (MongoDB ≥ 5.0 applies
 * an update's paths sorted name by name), or undefined where that order is not modelled: a
 * numeric or non-ASCII name, or two paths whose order name by name differs from their order
 * as whole strings (`a.x`, `a-b`: FerretDB sorts whole strings).
 */
export function creationOrder (a: string, b: string): number | undefined {
  if (!orderModelled(a) || !orderModelled(b)) return undefined
  const order = comparePaths(a, b)
  return Math.sign(order) === Math.sign(a < b ? -1 : a > b ? 1 : 0) ? order : undefined
}
