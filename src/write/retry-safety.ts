import type { Document } from 'mongodb'
import { touchesFilter } from './paths.js'
import { DELETE_MANY, DELETE_ONE, INSERT, REPLACE_ONE, type WriteOp } from './write-op.js'

// applying one of these twice leaves the document as applying it once ($inc, $push do not)
const IDEMPOTENT_OPERATORS = new Set(['$set', '$unset', '$setOnInsert', '$max', '$min', '$addToSet'])

function onlyId (filter: Document): boolean {
  let n = 0
  for (const k in filter) {
    if (k !== '_id') return false
    n++
  }
  return n === 1
}

/**
 * Whether sending this write again can never apply it twice:
 * - inserts: their _id is fixed before queuing, so a second copy is a duplicate-key error;
 * - updates made only of $set / $unset / $setOnInsert / $max / $min / $addToSet whose paths do not touch the filter
 *   (an updateOne whose $set changes a filtered field would select another document the
 *   second time);
 * - deleteMany, and deleteOne / replaceOne by `_id` alone.
 */
export function isRetrySafe (op: WriteOp): boolean {
  if (op.kind === INSERT || op.kind === DELETE_MANY) return true
  const body = op.body
  if (op.kind === DELETE_ONE || op.kind === REPLACE_ONE) return onlyId(body.filter)
  const update = body.update
  if (update === undefined || Array.isArray(update) || body.arrayFilters !== undefined) return false
  for (const operator in update) if (!IDEMPOTENT_OPERATORS.has(operator)) return false
  return onlyId(body.filter) || !touchesFilter(body.filter, update)
}
