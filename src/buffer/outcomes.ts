import type { Collection } from 'mongodb'
import { ErrorCodes, WriteBufferError, WriteRejectedError, type WriteOutcome } from '../errors.js'
import { describeError, type Failure, type PartialFailure, type ServerWriteError } from '../mongo/driver-errors.js'
import { isRetrySafe } from '../write/retry-safety.js'
import { sendProblem } from '../write/send-check.js'
import { INSERT, REPLACE_ONE, UPDATE_MANY, UPDATE_ONE, type WriteOp, type WriteResult } from '../write/write-op.js'

/**
 * Driver answer → what each write of the batch is told. Pure functions: they decide, the
 * Sender acts. A bulkWrite reports totals, `insertedIds`/`upsertedIds` by index and
 * `writeErrors` by index; that is all a caller can learn about its own write.
 */

const EMPTY: Readonly<Record<string, never>> = Object.freeze({})

/** The result of the acknowledged write at `index` of its bulkWrite. */
export function resultOf (op: WriteOp, index: number, upsertedIds: Record<number, unknown> | undefined): WriteResult {
  if (op.kind === INSERT) return { insertedId: op.id }
  if ((op.kind === UPDATE_ONE || op.kind === UPDATE_MANY || op.kind === REPLACE_ONE) && upsertedIds !== undefined) {
    const id = upsertedIds[index]
    if (id !== undefined) return { upsertedId: id }
  }
  return EMPTY
}

export interface RetryPolicy { maxAttempts: number, baseDelayMs: number }

/**
 * A whole bulkWrite failed (no per-write errors): 'retry' when the failure is transient and
 * sending `op` again cannot apply it twice and it has attempts and time left; else the error.
 * (When the failure's outcome is unknown the Sender has marked the write maybe applied.)
 */
export function afterBatchFailure (op: WriteOp, failure: Failure, retryAt: number, policy: RetryPolicy, collection: string): 'retry' | Error {
  const canRetry = failure.transient && op.attempts < policy.maxAttempts &&
    (op.deadline === 0 || op.deadline > retryAt) &&
    (failure.outcome === 'not-sent' || isRetrySafe(op))
  return canRetry ? 'retry' : batchFailed(op, failure, collection)
}

/**
 * An ordered batch may hold several writes of one document, applied in order: after an attempt
 * that may have applied some of them (`mayHaveApplied`), resending only some could undo a later
 * one that already ran (a $set resent after the $inc that followed it). All go again, or none:
 * whether none does (`anyStays`: some write may not go again). Sender#wholeFailed and
 * isolate.ts both ask it.
 */
export function noneGoesAgain (ordered: boolean, mayHaveApplied: boolean, anyStays: boolean): boolean {
  return ordered && mayHaveApplied && anyStays
}

/** What a write is told when close() gives up on it (`why`: where it was); unknown if an attempt may have applied it. */
export function closedError (op: WriteOp, why: string): Error {
  return new WriteBufferError(ErrorCodes.CLOSED, `write buffer closed ${why}`, op.maybeApplied ? 'unknown' : 'not-sent', op.attempts)
}

/** What a write of a failed bulkWrite is told when it is not sent again. */
export function batchFailed (op: WriteOp, failure: Failure, collection: string): Error {
  const outcome: WriteOutcome = op.maybeApplied ? 'unknown' : failure.outcome
  return new WriteBufferError(ErrorCodes.BATCH_FAILED,
    `bulkWrite to ${collection} failed (${describeError(failure.error)}); outcome ${outcome}`, outcome, op.attempts, failure.error)
}

/** What a partially failed bulkWrite means for one of its writes. */
export type Verdict =
  | { readonly kind: 'acknowledged', readonly value: WriteResult }
  | { readonly kind: 'rejected', readonly error: Error }
  /** ordered bulkWrite: after the first error, never executed: send again */
  | { readonly kind: 'not-executed' }
  /** a coalesced op was refused: one caller's part may be to blame; retry each write alone */
  | { readonly kind: 'uncoalesce' }

const NOT_EXECUTED: Verdict = { kind: 'not-executed' }
const UNCOALESCE: Verdict = { kind: 'uncoalesce' }

/** Reads a MongoBulkWriteError whose `writeErrors` name the refused writes by index. */
export class PartialFailureReader {
  readonly #errors = new Map<number, ServerWriteError>()
  readonly #upserted: Record<number, unknown> | undefined
  /** acknowledged, but the write concern was not met: applied, not as durably as asked */
  readonly #concernError: { errmsg?: string, code?: number } | undefined
  readonly #firstError: number

  constructor (err: PartialFailure, ordered: boolean, readonly collection: string) {
    for (const we of err.writeErrors) this.#errors.set(we.index, we)
    this.#upserted = err.result?.upsertedIds
    this.#concernError = err.result?.getWriteConcernError?.()
    this.#firstError = ordered ? Math.min(...this.#errors.keys()) : Infinity
  }

  get firstCode (): number | undefined { return this.#errors.values().next().value?.code }

  /**
   * Inserts sent again after an unknown outcome whose generated _id came back as a duplicate
   * key: only our own earlier attempt can hold that _id, so they may be written. Their ids
   * are to be looked up; `verdict` then takes the ids found.
   */
  idsToConfirm (ops: readonly WriteOp[]): unknown[] {
    const ids: unknown[] = []
    for (const [index, we] of this.#errors) {
      const op = ops[index]
      if (op !== undefined && we.code === 11000 && op.kind === INSERT && op.maybeApplied && op.generatedId) ids.push(op.id)
    }
    return ids
  }

  verdict (op: WriteOp, index: number, confirmed: Set<string> | null): Verdict {
    if (index > this.#firstError) return NOT_EXECUTED
    const we = this.#errors.get(index)
    if (we === undefined) {
      const concern = this.#concernError
      if (concern === undefined) return { kind: 'acknowledged', value: resultOf(op, index, this.#upserted) }
      return {
        kind: 'rejected',
        error: new WriteBufferError(ErrorCodes.BATCH_FAILED,
          `write concern not satisfied on ${this.collection}: ${concern.errmsg ?? 'unknown'}`, 'unknown', op.attempts, concern),
      }
    }
    if (confirmed?.has(String(op.id)) === true && op.generatedId) return { kind: 'acknowledged', value: { insertedId: op.id } }
    if (op.coalesced !== null && op.coalesced.length > 0) return UNCOALESCE
    const outcome: WriteOutcome = op.maybeApplied ? 'unknown' : 'rejected'
    return { kind: 'rejected', error: new WriteRejectedError(we.code, we.errmsg ?? 'write failed', op.attempts, we.errInfo, outcome, we) }
  }
}

/**
 * The driver threw while building or serializing a bulkWrite: nothing was sent. Which writes
 * cannot be sent now (`sendProblem`: changed by their caller after submit), each with its
 * error naming the field, and which go again; when no write alone is to blame, none can go
 * and every one is told so (`not-sent`, or `unknown` after an earlier ambiguous attempt).
 */
export function afterUnsendable (ops: readonly WriteOp[], err: unknown, collection: string): { again: WriteOp[], refused: Array<{ op: WriteOp, err: Error }> } {
  const again: WriteOp[] = []
  const refused: Array<{ op: WriteOp, err: Error }> = []
  for (const op of ops) {
    const problem = sendProblem(op)
    if (problem === undefined) {
      again.push(op)
    } else {
      refused.push({
        op,
        err: new WriteBufferError(ErrorCodes.INVALID_WRITE, `write cannot be sent (changed after it was submitted?): ${problem}`,
          op.maybeApplied ? 'unknown' : 'not-sent', op.attempts - 1, err),
      })
    }
  }
  if (refused.length > 0) return { again, refused }
  return { again: [], refused: again.map(op => ({ op, err: batchFailed(op, { outcome: 'not-sent', transient: false, error: err }, collection) })) }
}

/** Which of these _ids exist (primary read); null when that cannot be told (those writes stay `unknown`). */
export async function confirmInserted (collection: Pick<Collection, 'find'>, ids: unknown[]): Promise<Set<string> | null> {
  if (ids.length === 0) return null
  try {
    const found = await collection.find({ _id: { $in: ids as never[] } }, { projection: { _id: 1 }, readPreference: 'primary' }).toArray()
    return new Set(found.map(d => String(d._id)))
  } catch {
    return null
  }
}
