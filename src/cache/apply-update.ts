import { Double, Int32, Long } from 'mongodb'
import type { Document } from 'mongodb'
import { comparePaths, creationOrder, overlaps, plainPath } from '../write/paths.js'
import { isEmbeddable } from '../write/write-options.js'
import { compareExact, increment } from './bson-values.js'

/**
 * Applies $set / $unset / $inc / $max / $min ($setOnInsert: no effect) as the server would;
 * false when it cannot. MongoDB ≥ 5.0 applies one update's paths in the order of their names,
 * part by part, whatever their operators (so new fields are created in that order), but
 * numeric names in numeric order: with more than one path, a name that starts with a digit
 * or is not ASCII (whose order is not modelled here) is not patched, nor are paths whose order
 * part by part differs from their order as whole strings (`a.x`, `a-b`). write/coalesce.ts
 * merges by the same order.
 */
export function applyUpdate (doc: Document, update: Document | Document[] | undefined): boolean {
  if (update === undefined || Array.isArray(update)) return false
  const steps: Array<[op: string, path: string, value: unknown]> = []
  const paths: string[] = []
  for (const op in update) {
    if (op !== '$set' && op !== '$unset' && op !== '$inc' && op !== '$max' && op !== '$min' && op !== '$setOnInsert') return false
    const fields = update[op] as Document
    for (const path in fields) {
      if (!plainPath(path)) return false
      paths.push(path)
      // $setOnInsert: the document exists, no effect (its paths still conflict with others)
      if (op !== '$setOnInsert') steps.push([op, path, fields[path]])
    }
  }
  if (paths.length > 1) {
    paths.sort(comparePaths)
    for (let i = 1; i < paths.length; i++) {
      const a = paths[i - 1] as string
      const b = paths[i] as string
      // two operators on one path, or `a` and `a.b`: the server refuses the update
      if (overlaps(a, b)) return false
      if (creationOrder(a, b) === undefined) return false
    }
    steps.sort((a, b) => comparePaths(a[1], b[1]))
  }
  for (const [op, path, value] of steps) if (!applyPath(doc, op, path, value)) return false
  return true
}

/** A field of a decoded document: own properties only (`constructor`, `toString` are not fields). */
function own (node: Document, name: string): unknown {
  return Object.hasOwn(node, name) ? node[name] : undefined
}

function applyPath (doc: Document, op: string, path: string, value: unknown): boolean {
  const parts = path.split('.')
  // `node.__proto__ = v` would set a prototype, not the field the server writes
  if (parts.includes('__proto__')) return false
  let node: Document = doc
  for (let i = 0; i < parts.length - 1; i++) {
    const p = parts[i] as string
    const next: unknown = own(node, p)
    if (next === undefined) {
      if (op === '$unset') return true // nothing to unset
      node = node[p] = {}
      continue
    }
    if (!isEmbeddable(next)) return false // arrays, scalars: the server's rules there are not modelled
    node = next
  }
  const leaf = parts[parts.length - 1] as string
  if (op === '$set') {
    node[leaf] = value
  } else if (op === '$unset') {
    delete node[leaf]
  } else if (op === '$max' || op === '$min') {
    const current: unknown = own(node, leaf)
    if (current === undefined) {
      node[leaf] = value
    } else {
      const order = compareExact(current, value)
      if (order === undefined) return false
      if (op === '$max' ? order < 0 : order > 0) node[leaf] = value
    }
  } else {
    const sum = increment(own(node, leaf), value)
    if (sum === undefined) return false
    node[leaf] = sum.kind === 'int' ? new Int32(Number(sum.value)) : sum.kind === 'long' ? Long.fromBigInt(BigInt(sum.value)) : new Double(Number(sum.value))
  }
  return true
}
