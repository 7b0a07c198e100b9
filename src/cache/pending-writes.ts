import type { Document } from 'mongodb'
import { targetOfId } from '../write/target.js'
import { DELETE_MANY, DELETE_ONE, INSERT, REPLACE_ONE, type WriteOp } from '../write/write-op.js'
import { disjoint, fieldsOf, idTargetOf, intersects, matches, updatedRoots, type Filter } from './filter-facts.js'

/** One collection's writes queued and not yet settled. */
interface Writes {
  /** each write's sequence number (order of queuing) */
  seq: Map<WriteOp, number>
  /** writes by target (`{ _id }` of inserts, the filter of a write by one `_id`) */
  byTarget: Map<string, Set<WriteOp>>
  /** writes whose filter is not one `_id`: they may touch any document */
  wide: Set<WriteOp>
}

const NONE: readonly WriteOp[] = []

/**
 * The writes the cache has seen queued and not yet settled, indexed so that a read costs
 * O(writes to its document), not O(all pending): by target, plus the few "wide" writes whose
 * filter is not a single `_id`. Only a read that found nothing looks at every pending write
 * of its collection (any of them might create a match).
 */
export class PendingWrites {
  /** sequence number of the next write */
  seq = 0
  readonly #byName = new Map<string, Writes>()
  readonly #waiters = new Map<WriteOp, Array<() => void>>()

  add (name: string, op: WriteOp): void {
    let w = this.#byName.get(name)
    if (w === undefined) this.#byName.set(name, w = { seq: new Map(), byTarget: new Map(), wide: new Set() })
    w.seq.set(op, this.seq++)
    const target = targetOfWrite(op)
    if (target === undefined) {
      w.wide.add(op)
    } else {
      let set = w.byTarget.get(target)
      if (set === undefined) w.byTarget.set(target, set = new Set())
      set.add(op)
    }
  }

  /** The write's sequence number while it is pending. */
  seqOf (name: string, op: WriteOp): number | undefined {
    return this.#byName.get(name)?.seq.get(op)
  }

  /** Returns the `_id` target of the write's document when no other write to it is pending any more. */
  settle (name: string, op: WriteOp): string | undefined {
    const w = this.#byName.get(name)
    let caughtUp: string | undefined
    if (w?.seq.delete(op) === true) {
      const target = targetOfWrite(op)
      if (target === undefined) {
        w.wide.delete(op)
      } else {
        const set = w.byTarget.get(target)
        set?.delete(op)
        if (set?.size === 0) {
          w.byTarget.delete(target)
          caughtUp = target
        }
      }
    }
    const waiters = this.#waiters.get(op)
    if (waiters !== undefined) {
      this.#waiters.delete(op)
      for (const resolve of waiters) resolve()
    }
    return caughtUp
  }

  all (name: string): readonly WriteOp[] {
    const w = this.#byName.get(name)
    return w === undefined ? NONE : [...w.seq.keys()]
  }

  /** For a read by one `_id`: the writes queued to that document (and the wide ones). */
  toTarget (name: string, filter: Filter): readonly WriteOp[] {
    const w = this.#byName.get(name)
    const id = idTargetOf(filter)
    if (w === undefined || id === undefined) return NONE
    return [...(w.byTarget.get(id) ?? NONE), ...w.wide]
  }

  /** Writes queued before `startSeq` and still pending that may change the answer `doc` to `filter`. */
  missedBy (name: string, filter: Filter, doc: Document | null, startSeq: number, projected: boolean): WriteOp[] {
    const w = this.#byName.get(name)
    if (w === undefined || w.seq.size === 0) return []
    const candidates = doc === null || projected || doc._id === undefined
      ? w.seq.keys()
      : [...(w.byTarget.get(targetOfId(doc._id)) ?? NONE), ...w.wide]
    const out: WriteOp[] = []
    for (const op of candidates) {
      if ((w.seq.get(op) ?? Infinity) < startSeq && affects(op, doc, filter, projected)) out.push(op)
    }
    return out
  }

  /** Whether any of `ops` may change the answer `doc` to `filter`. */
  raced (ops: readonly WriteOp[], doc: Document | null, filter: Filter, projected: boolean): boolean {
    for (const op of ops) if (affects(op, doc, filter, projected)) return true
    return false
  }

  /** Resolves once every given write has settled; sends the queue at once. */
  settled (ops: readonly WriteOp[], sendNow: () => void): Promise<unknown> {
    if (ops.length === 0) return Promise.resolve()
    sendNow()
    return Promise.all(ops.map(op => new Promise<void>(resolve => {
      let list = this.#waiters.get(op)
      if (list === undefined) this.#waiters.set(op, list = [])
      list.push(resolve)
    })))
  }
}

/**
 * The document a write is known to touch, or undefined for a write that may touch several (a
 * collation compares strings its own way: `{ _id: 'A' }` may select `'a'`).
 */
function targetOfWrite (op: WriteOp): string | undefined {
  if (op.kind === INSERT) return op.target
  return op.body.collation === undefined ? idTargetOf(op.body.filter) : undefined
}

/** Whether `op` could change what findOne(filter) returns, given what it returned (`doc`). */
export function affects (op: WriteOp, doc: Document | null, filter: Filter, projected: boolean): boolean {
  if (op.kind === INSERT) return doc === null && matches(filter, op.body.document) !== false
  const body = op.body
  if (body.collation !== undefined) return true // strings compared by the collation, not decided here
  if (doc !== null) {
    if (projected || doc._id === undefined) return !disjoint(body.filter, filter)
    const id = idTargetOf(body.filter)
    if (id !== undefined) return id === targetOfId(doc._id)
    return matches(body.filter, doc) !== false
  }
  if (op.kind === DELETE_ONE || op.kind === DELETE_MANY) return false
  const roots = updatedRoots(body.update)
  if ((body.upsert === true || op.kind === REPLACE_ONE) && !disjoint(body.filter, filter)) return true
  return roots === null || op.kind === REPLACE_ONE || intersects(roots, fieldsOf(filter))
}
