import type { Document } from 'mongodb'
import { touchesFilter } from './paths.js'
import { DELETE_MANY, DELETE_ONE, INSERT, REPLACE_ONE, UPDATE_MANY, type WriteOp } from './write-op.js'

// applying one of these twice leaves the document as applying it once ($inc, $push do not)
const IDEMPOTENT_OPERATORS = new Set(['$set', '$unset', '$setOnInsert', '$max', '$min', '$addToSet'])

/**
 * Whether the filter selects one document whatever happened in between: an `_id` equality
 * (a plain value, not an operator object) — other fields beside it only narrow it further.
 */
function pinsOneDocument (filter: Document): boolean {
  if (!('_id' in filter)) return false
  const id: unknown = filter._id
  if (typeof id !== 'object' || id === null) return id !== undefined
  if (id instanceof RegExp || Array.isArray(id)) return false
  if ((id as { _bsontype?: unknown })._bsontype !== undefined || id instanceof Date) return true
  for (const k in id) if (k.charCodeAt(0) === 36) return false // { $in: … }, { $gt: … }
  return true
}

/**
 * Whether sending this write again can never apply it twice:
 * - inserts: their _id is fixed before queuing, so a second copy is a duplicate-key error;
 * - updates made only of $set / $unset / $setOnInsert / $max / $min / $addToSet whose paths do
 *   not touch the filter (a $set that changes a filtered field would select another document
 *   the second time);
 * - and a resend must not reach another document: an updateOne / replaceOne / deleteOne only
 *   when its filter pins one document — by `_id`, or declared unique by its caller
 *   (`uniqueFilter: true`: a unique index covers it). On any other filter, the first attempt
 *   may have changed document A and the resend change B, which the filter also matches.
 *   updateMany and deleteMany select every match each time: a resend reaches the same set.
 */
export function isRetrySafe (op: WriteOp): boolean {
  if (op.kind === INSERT || op.kind === DELETE_MANY) return true
  const body = op.body
  const one = op.kind !== UPDATE_MANY && (op.uniqueFilter || pinsOneDocument(body.filter))
  if (op.kind === DELETE_ONE || op.kind === REPLACE_ONE) return one
  if (op.kind !== UPDATE_MANY && !one) return false
  const update = body.update
  if (update === undefined || Array.isArray(update) || body.arrayFilters !== undefined) return false
  for (const operator in update) if (!IDEMPOTENT_OPERATORS.has(operator)) return false
  return !touchesFilter(body.filter, update)
}
