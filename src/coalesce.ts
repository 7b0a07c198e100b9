import type { Document } from 'mongodb'
import { touchesFilter, overlaps } from './paths.js'
import { UPDATE_ONE, bodyOf, type WriteBody, type WriteOp } from './write-op.js'

/**
 * Coalescing: consecutive same-target `updateOne`s made only of $set / $inc / $unset
 * (and $setOnInsert with upsert) merge into one op: $set and $unset last-wins per field,
 * $inc summed; a follower's $setOnInsert is dropped (only the first of a sequence could
 * have inserted, so it is a no-op one by one too).
 * A merge is refused, and the later write simply waits for the next batch, when:
 * - the two differ in upsert or carry arrayFilters / collation / hint;
 * - a path appears under two operators, or one path is a prefix of another
 *   (`a` vs `a.b`: the server would reject the merged document as a conflict);
 * - an $inc operand is not a plain JS number (Long, Decimal128… keep their exact type);
 * - an updated path overlaps a filter field (the second write's filter might then
 *   select a different document than the first one left behind).
 */

const MERGEABLE = new Set(['$set', '$inc', '$unset', '$setOnInsert'])

/** Whether this op could take part in a merge at all (checked on both sides). */
function mergeable (body: WriteBody): boolean {
  if (body.arrayFilters !== undefined || body.collation !== undefined || body.hint !== undefined) return false
  const update = body.update
  if (update === undefined || Array.isArray(update)) return false
  for (const operator in update) {
    if (!MERGEABLE.has(operator)) return false
    if (operator === '$setOnInsert' && body.upsert !== true) return false
  }
  return !touchesFilter(body.filter, update)
}

/** Merges `next` into `leader` (both queued, same target). Returns false and changes nothing if it cannot. */
export function tryCoalesce (leader: WriteOp, next: WriteOp): boolean {
  if (leader.kind !== UPDATE_ONE || next.kind !== UPDATE_ONE) return false
  const lb = bodyOf(leader)
  const nb = bodyOf(next)
  if ((lb.upsert === true) !== (nb.upsert === true)) return false
  if (leader.mergedUpdate === null && !mergeable(lb)) return false
  if (!mergeable(nb)) return false
  // mergeable(): both are plain update documents
  const leaderUpdate = lb.update as Document
  const nextUpdate = nb.update as Document
  const current = leader.mergedUpdate ?? leaderUpdate
  // check every path of `next` against every path already present, before changing anything.
  // A follower's $setOnInsert can never apply: after the leader (an upsert) runs, the
  // document exists. So it is left out of the merge entirely.
  for (const op in nextUpdate) {
    if (op === '$setOnInsert') continue
    const fields = nextUpdate[op] as Document
    for (const path in fields) {
      for (const op2 in current) {
        for (const path2 in current[op2]) {
          if (!overlaps(path, path2)) continue
          if (path !== path2 || op !== op2) return false
          if (op === '$inc' && (typeof fields[path] !== 'number' || typeof current[op2][path2] !== 'number')) return false
        }
      }
      if (op === '$inc' && typeof fields[path] !== 'number') return false
    }
  }
  // own copy on first merge: the caller's update object is never mutated
  let merged = leader.mergedUpdate
  if (merged === null) {
    merged = {}
    for (const op in leaderUpdate) merged[op] = { ...leaderUpdate[op] }
    leader.originalUpdate = leaderUpdate
    leader.mergedUpdate = merged
    lb.update = merged
  }
  for (const op in nextUpdate) {
    if (op === '$setOnInsert') continue
    const fields = nextUpdate[op] as Document
    const target = (merged[op] ??= {}) as Document
    for (const path in fields) {
      if (op === '$inc') target[path] = (target[path] === undefined ? 0 : target[path] as number) + (fields[path] as number)
      else target[path] = fields[path]
    }
  }
  ;(leader.followers ??= []).push(next)
  return true
}

/** Undoes a merge: the leader gets its own update back; followers are returned to be retried one by one. */
export function split (leader: WriteOp): WriteOp[] {
  const followers = leader.followers ?? []
  if (leader.originalUpdate !== null) bodyOf(leader).update = leader.originalUpdate
  leader.mergedUpdate = null
  leader.originalUpdate = null
  leader.followers = null
  leader.noMerge = true
  for (const f of followers) {
    f.noMerge = true
    f.maybeApplied ||= leader.maybeApplied // an earlier attempt of the merged op may have applied it
  }
  return followers
}
