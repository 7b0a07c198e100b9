import type { Document } from 'mongodb'
import { creationOrder, overlaps, touchesFilter } from './paths.js'
import { isPlain } from './write-options.js'
import { QUEUED, UPDATE_ONE, type WriteBody, type WriteOp } from './write-op.js'

/**
 * Coalescing: a later same-target `updateOne` made only of $set / $inc / $unset / $max / $min /
 * $addToSet (and $setOnInsert with upsert) is folded into an earlier queued one, which then
 * carries both, so that applying it equals applying the two one after the other:
 * $set and $unset last-wins per field, $inc summed, $max the larger and $min the smaller of
 * the two operands (max(max(x, a), b) = max(x, max(a, b))), $addToSet both lists of elements
 * in order as one `$each`; the later write's $setOnInsert is dropped (only the first of a
 * sequence could have inserted, so it is a no-op one by one too).
 * Coalescing is refused, and the later write simply waits for the next batch, when:
 * - the two differ in upsert or carry arrayFilters / collation / hint; an upsert's filter is not
 *   plain equalities (the document it inserts would not match it: see insertMatches);
 * - a path appears under two operators, or one path is a prefix of another
 *   (`a` vs `a.b`: the server would reject the merged document as a conflict);
 * - two $inc operands are not whole JS numbers of one sign (no -0) with an int32 sum (Long, Decimal128… keep their
 *   exact type; fractions round differently summed first; a larger sum would travel as a double); the
 *   two $max / $min operands are not both finite JS numbers or both Dates (the server's
 *   cross-type order is not modelled); an $addToSet operand is an object with a $-modifier
 *   other than $each;
 * - the update document or an operator's operand is not a plain object (write-options' isPlain):
 *   a Map, a class instance or a toBSON is a valid operand, just never merged;
 * - an updated path overlaps a filter field (the second write's filter might then
 *   select a different document than the first one left behind);
 * - the later write touches a path the earlier one does not, and that path does not sort
 *   after every path the earlier one touches: one update creates its new fields in the
 *   order of their names (MongoDB ≥ 5.0), two updates in the order they run, so the
 *   coalesced document could end with its fields in another order (and where that order
 *   is not modelled — numeric or non-ASCII names, see paths.ts#creationOrder — it is refused).
 */

const MERGEABLE = new Set(['$set', '$inc', '$unset', '$setOnInsert', '$max', '$min', '$addToSet'])

const INT32_MAX = 2 ** 31 - 1

/**
 * Two $inc operands whose sum applies exactly as the two one after the other: whole numbers
 * whose sum is an int32 like each of them. Fractions are not (x + a + b and x + (a + b) round
 * differently: 0.1 then 0.2 is not 0.30000000000000004), nor a sum past int32 (the driver
 * would send it as a double, and the field would become one).
 */
function summable (a: unknown, b: unknown): boolean {
  return typeof a === 'number' && typeof b === 'number' && Number.isInteger(a) && Number.isInteger(b) &&
    Math.abs(a) <= INT32_MAX && Math.abs(b) <= INT32_MAX && Math.abs(a + b) <= INT32_MAX &&
    // one sign: a field's value then passes every partial sum on its way (past int32 one by one
    // iff summed: an int32 at its max +1 then -1 ends an int64 one by one, an int32 summed), and
    // no -0 (sent as a double: it makes an int field a double, which a sum without it does not)
    (a >= 0) === (b >= 0) && !Object.is(a, -0) && !Object.is(b, -0)
}

/** Order of two $max/$min operands (negative: a < b), or undefined when not both finite numbers or both Dates. */
function comparable (a: unknown, b: unknown): number | undefined {
  if (typeof a === 'number' && typeof b === 'number' && Number.isFinite(a) && Number.isFinite(b)) return a - b
  if (a instanceof Date && b instanceof Date && !Number.isNaN(a.getTime()) && !Number.isNaN(b.getTime())) return a.getTime() - b.getTime()
  return undefined
}

/** The elements an $addToSet operand adds: `{ $each: [...] }` or a single value; undefined for other modifiers. */
function elementsOf (operand: unknown): unknown[] | undefined {
  if (typeof operand !== 'object' || operand === null || Array.isArray(operand) || !isPlain(operand)) return [operand]
  const keys = Object.keys(operand)
  if (keys.length === 0 || (keys[0] as string).charCodeAt(0) !== 36) return [operand] // a document element
  const each: unknown = (operand as { $each?: unknown }).$each
  return keys.length === 1 && Array.isArray(each) ? each : undefined
}

/** Whether this op could take part in coalescing at all (checked on both sides). */
function coalescible (body: WriteBody): boolean {
  if (body.arrayFilters !== undefined || body.collation !== undefined || body.hint !== undefined) return false
  if (body.upsert === true && !insertMatches(body.filter)) return false
  const update = body.update
  if (update === undefined || Array.isArray(update) || !isPlain(update)) return false
  for (const operator in update) {
    if (!MERGEABLE.has(operator)) return false
    if (operator === '$setOnInsert' && body.upsert !== true) return false
    if (!isPlain(update[operator])) return false
  }
  return !touchesFilter(body.filter, update)
}

/**
 * Whether the document an upsert inserts matches its filter, so that a later upsert of the same
 * filter updates it rather than inserting another (what merging two upserts assumes): a filter
 * of plain equalities — no operator (`{a: {$gt: 5}}` inserts no `a`), no regular expression.
 * The update cannot change those fields (touchesFilter).
 */
function insertMatches (filter: Document): boolean {
  for (const field in filter) {
    if (field.charCodeAt(0) === 36) return false
    const v: unknown = filter[field]
    if (typeof v !== 'object' || v === null) continue
    if (v instanceof RegExp || (v as { _bsontype?: unknown })._bsontype === 'BSONRegExp') return false
    if (!Array.isArray(v) && isPlain(v)) for (const k in v) if (k.charCodeAt(0) === 36) return false
  }
  return true
}

/**
 * The one rule for whether `next` may be coalesced into `leader` (same target) before their
 * updates are even read: both queued, neither to go alone, and `next` with what it carries
 * within `room`, the bytes its leader's batch has left. Whether the updates merge is
 * `mergedUpdate`'s.
 */
export function mayCoalesce (leader: WriteOp, next: WriteOp, room: number): boolean {
  return leader.state === QUEUED && next.state === QUEUED && !leader.alone && !next.alone && next.bytes + next.carried <= room
}

/**
 * The update `leader` carries once `next` (same target) is coalesced into it, `current` being
 * the update it carries by then (null: its model's); null if they cannot merge. Pure: it
 * changes neither write (WriteOp#coalesce puts the result in place) and never throws — a
 * throw while reading an update (a caller's getter or Proxy trap armed after submit) is a
 * refusal: the one to blame then goes alone and fails alone when the driver serializes it
 * (send-check.ts). Before, a throw left half of `next` merged into `leader` and escaped into
 * select(), whose next pass threw again: both writes never settled.
 */
export function mergedUpdate (leader: WriteOp, current: Document | null, next: WriteOp): Document | null {
  try {
    return merge(leader, current, next)
  } catch {
    return null
  }
}

/** Coalesces `next` into `leader` now if their updates merge (a lingering write, as `next` is pushed); whether it did. */
export function tryCoalesce (leader: WriteOp, next: WriteOp): boolean {
  const update = mergedUpdate(leader, null, next)
  if (update === null) return false
  leader.coalesce(next, update)
  return true
}

function merge (leader: WriteOp, current: Document | null, next: WriteOp): Document | null {
  if (leader.kind !== UPDATE_ONE || next.kind !== UPDATE_ONE) return null
  const lb = leader.body
  const nb = next.body
  if ((lb.upsert === true) !== (nb.upsert === true)) return null
  // a leader that carries a merged update passed this check when the first write joined it
  if (leader.ownUpdate === null && current === null && !coalescible(lb)) return null
  if (!coalescible(nb)) return null
  // coalescible(): both are plain update documents
  const leaderUpdate = current ?? lb.update as Document
  const nextUpdate = nb.update as Document
  // check every path of `next` against every path already present, before building anything.
  // A later write's $setOnInsert can never apply: after the leader (an upsert) runs, the
  // document exists. So it is left out of the merge entirely.
  for (const op in nextUpdate) {
    if (op === '$setOnInsert') continue
    const fields = nextUpdate[op] as Document
    for (const path in fields) {
      // a path the leader does not touch yet must be created after every path it does: one
      // update creates its new fields in name order, two updates in the order they run
      let touched = false
      let createdAfter = true
      for (const op2 in leaderUpdate) {
        const fields2 = leaderUpdate[op2] as Document
        for (const path2 in fields2) {
          if (path2 === path) touched = true
          else if (createdAfter) {
            const order = creationOrder(path, path2)
            if (order === undefined || order < 0) createdAfter = false
          }
          if (!overlaps(path, path2)) continue
          if (path !== path2 || op !== op2) return null
          if (op === '$inc' && !summable(fields[path], fields2[path2])) return null
          if ((op === '$max' || op === '$min') && comparable(fields[path], fields2[path2]) === undefined) return null
        }
      }
      if (!touched && !createdAfter) return null
      if (op === '$inc' && typeof fields[path] !== 'number') return null
      if (op === '$addToSet' && elementsOf(fields[path]) === undefined) return null
    }
  }
  // a copy: neither the caller's update objects nor the leader's model change here
  const merged: Document = {}
  for (const op in leaderUpdate) merged[op] = { ...(leaderUpdate[op] as Document) }
  for (const op in nextUpdate) {
    if (op === '$setOnInsert') continue
    const fields = nextUpdate[op] as Document
    const target = (merged[op] ??= {}) as Document
    for (const path in fields) {
      const value: unknown = fields[path]
      const before: unknown = target[path]
      if (before === undefined) {
        target[path] = value
      } else if (op === '$inc') {
        target[path] = (before as number) + (value as number)
      } else if (op === '$max' || op === '$min') {
        const order = comparable(before, value) as number // checked above
        target[path] = (op === '$max' ? order < 0 : order > 0) ? value : before
      } else if (op === '$addToSet') {
        target[path] = { $each: [...(elementsOf(before) as unknown[]), ...(elementsOf(value) as unknown[])] }
      } else {
        target[path] = value
      }
    }
  }
  return merged
}
