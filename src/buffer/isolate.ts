import type { Clock } from '../clock.js'
import type { AnyBulkWriteOperation } from 'mongodb'
import type { SentAnswer } from '../mongo/write-command.js'
import { ErrorCodes, WriteBufferError, WriteRejectedError } from '../errors.js'
import { describeError, readFailure, type DriverFailure, type Failure, type PartialFailure } from '../mongo/driver-errors.js'
import { knownCode } from '../mongo/server-codes.js'
import { isRetrySafe } from '../write/retry-safety.js'
import { INSERT, SETTLED, type WriteOp, type WriteResult } from '../write/write-op.js'
import { noneGoesAgain, PartialFailureReader, resultOf } from './outcomes.js'

/**
 * A whole write command the server refused (`ok: 0`) is split in halves and each half sent
 * again, recursively, until the refusal is pinned to single writes (Kafka's producer splits a
 * batch the broker refuses; autobatch-promise shrinks a failing batch): those fail with the
 * server's code, the others are applied. One bad write (a `collation` DocumentDB refuses for
 * the whole command, a pipeline update FerretDB 1.24 refuses) no longer fails its batch-mates.
 *
 * Which writes may go again follows what the refusal proves (mongo/driver-errors.ts): all of
 * them when nothing was applied (MongoDB, a code raised before execution); otherwise only the
 * retry-safe ones — the rest are told `unknown` at once. Halves go one after the other (2⌈log2 n⌉
 * extra round trips for one bad write; one command on the wire per refused batch). Two halves
 * refused with one code the code table does not know are a refusal of the command, however it
 * is coded: every write is told, nothing is split further.
 * A refusal that cannot be a statement's (authorization, a bad namespace: COMMAND_WIDE) is not
 * split: the writes fail together, once. While a batch is isolated it stays in flight: its
 * targets stay held and its in-flight slot taken, which also caps how many batches are split
 * at once (maxInFlight).
 */

/** Refusals of the command itself, whatever its statements: splitting would only repeat them. */
const COMMAND_WIDE = new Set([13, 18, 20, 26, 59, 73, 166])

/** What isolation decided for each write; the Sender settles, requeues or fails them. */
export interface Isolation {
  acknowledged: (op: WriteOp, result: WriteResult) => void
  rejected: (op: WriteOp, err: Error) => void
  /** to send again as they are (not executed in an ordered batch; `uncoalesced` of them split off a merged update) */
  again: (ops: WriteOp[], uncoalesced: number) => void
  /** a part failed otherwise (network, transient): decided as a whole-batch failure */
  failed: (ops: WriteOp[], failed: DriverFailure) => void
}

/** What isolation decided, gathered for the Sender to act on once it is done. */
export class IsolationOutcome implements Isolation {
  readonly applied: WriteOp[] = []
  readonly results: WriteResult[] = []
  readonly refused: Array<{ op: WriteOp, err: Error }> = []
  readonly toSendAgain: WriteOp[] = []
  uncoalescedCount = 0
  /** writes whose part failed otherwise, all of them; and each such part with its own failure (judged by it: Sender#failedParts) */
  readonly failedOps: WriteOp[] = []
  readonly failedParts: Array<{ ops: WriteOp[], failed: DriverFailure }> = []

  acknowledged (op: WriteOp, result: WriteResult): void {
    this.applied.push(op)
    this.results.push(result)
  }

  rejected (op: WriteOp, err: Error): void { this.refused.push({ op, err }) }

  again (ops: WriteOp[], uncoalesced: number): void {
    this.toSendAgain.push(...ops)
    this.uncoalescedCount += uncoalesced
  }

  failed (ops: WriteOp[], failed: DriverFailure): void {
    this.failedOps.push(...ops)
    this.failedParts.push({ ops, failed })
  }
}

export interface IsolationContext {
  /** sends a part: these writes, as these models */
  send: (ops: readonly WriteOp[], models: AnyBulkWriteOperation[]) => Promise<SentAnswer>
  /** what a whole-command refusal means (outcome: 'rejected' when proven not applied; transient) */
  classify: (refusal: DriverFailure) => Promise<Failure>
  /** which of these generated _ids are written (outcomes.ts confirmInserted): a duplicate key of our own earlier attempt */
  confirm: (ids: unknown[]) => Promise<Set<string> | null>
  /** close() gave up waiting: nothing more is sent (a part not sent yet goes back, and is told so) */
  stopped: () => boolean
  ordered: boolean
  collection: string
  /** the server's write errors name the statements that failed (server-identity.ts#reportsStatements) */
  reportsStatements: boolean
  /**
   * isolating a batch whose connection closed twice (Sender#isolateClosed): a part whose
   * connection closes too is split further like a refused part (outcome unknown), and
   * `closedAt` keeps when the last one closed (clock time; 0: none)
   */
  closed?: { at: number }
  clock: Clock
}

/**
 * Whether a reply's write errors tell which statements of these writes failed and which were
 * applied. MongoDB's do, and DocumentDB's (server-identity.ts#reportsStatements). Another
 * server's update or delete command may stop at a failing statement and report it at another
 * index (FerretDB 1.24: a failure at statement 3 reported as statement 0, ok: 1, statements 4-5
 * never run): its write errors then prove only that some statement failed — the batch is
 * isolated as a refusal whose outcome is unknown. Inserts keep their indexes (a duplicate key is
 * reported where it is, on every server tried), and so does a lone statement.
 */
export function indexesProven (ops: readonly WriteOp[], reportsStatements: boolean): boolean {
  return reportsStatements || ops.length < 2 || (ops[0] as WriteOp).kind === INSERT
}

/** Whether `refusal` is a reply's write errors (from a server whose indexes are not proven: the only ones isolated), not a refusal of the command. */
function unprovenStatement (refusal: DriverFailure): boolean {
  return refusal.kind === 'write-errors'
}

/** What write errors from a server whose indexes are not proven say: something failed, anything may have been applied. */
export function unprovenFailure (failed: DriverFailure): Failure {
  return { outcome: 'unknown', transient: false, error: failed.error }
}

/** Whether a refused batch is isolated (a lone write: pinned at once, with the server's code) rather than failed as a whole. */
export function splittable (ops: readonly WriteOp[], refusal: DriverFailure, failure: Failure): boolean {
  if (failure.transient) return false
  const code = refusal.code
  return !(code !== undefined && COMMAND_WIDE.has(code)) && ops.length > 0
}

/**
 * `ops` were refused as one command with `failure`: settle through `out` what can be told now,
 * and send the others again in halves until every write has its own answer.
 */
export async function isolate (ops: WriteOp[], refusal: DriverFailure, failure: Failure, ctx: IsolationContext, out: Isolation): Promise<Left> {
  const proven = failure.outcome === 'rejected'
  if (noneGoesAgain(ctx.ordered, !proven, ops.some(op => !isRetrySafe(op)))) {
    // an ordered batch: all go again, or none (outcomes.ts#noneGoesAgain)
    for (const op of ops) {
      op.mayHaveApplied()
      out.rejected(op, pinned(op, refusal, 'unknown'))
    }
    return DONE
  }
  const resend: WriteOp[] = []
  for (const op of ops) {
    if (proven) {
      resend.push(op)
    } else if (isRetrySafe(op)) {
      // the refused command may have applied it: what its resend is told must allow for that
      // (a duplicate key of a generated _id is then looked up; any other error is unknown)
      op.mayHaveApplied()
      resend.push(op)
    } else {
      op.mayHaveApplied()
      out.rejected(op, pinned(op, refusal, 'unknown'))
    }
  }
  // write errors whose statement is not proven: the one left may be innocent, and is retry-safe — it goes again alone to learn its own answer
  if (resend.length === 1 && unprovenStatement(refusal)) return await sendPart(resend, ctx, out)
  if (resend.length === 1) {
    const op = resend[0] as WriteOp
    if (op.coalesced !== null && op.coalesced.length > 0) {
      // one caller's part of a merged update may be to blame: each goes again alone
      const parts = op.uncoalesce()
      out.again([op, ...parts], parts.length)
      return LEFT_AGAIN
    }
    out.rejected(op, pinned(op, refusal, proven && !op.maybeApplied ? 'rejected' : 'unknown'))
    return DONE
  }
  if (resend.length === 0) return DONE
  const mid = resend.length >>> 1
  const halves = [resend.slice(0, mid), resend.slice(mid)]
  if (!ctx.ordered) {
    // one half after the other: a refused batch keeps one command on the wire, as its one
    // maxInFlight slot says (together, one refusal put ~n/2 commands out at once)
    const a = await sendOnce(halves[0] as WriteOp[], ctx, out)
    const b = await sendOnce(halves[1] as WriteOp[], ctx, out)
    if (a.kind === 'refused' && b.kind === 'refused' && sameUnknownCode(a.refusal, b.refusal)) {
      // both halves refused alike with a code the table does not know (Atlas's 8000 for a
      // permission): the command is refused, not a statement of it — every write told once, no
      // split further (3 commands, not 2n). A known statement code (BadValue, a collation
      // refused by DocumentDB…) is split down to its writes: two bad ones in different halves
      // must not fail their mates.
      for (const half of [[halves[0], a], [halves[1], b]] as const) {
        const proof = half[1].failure.outcome === 'rejected'
        for (const op of half[0] as WriteOp[]) out.rejected(op, pinned(op, half[1].refusal, proof && !op.maybeApplied ? 'rejected' : 'unknown'))
      }
      return DONE
    }
    if (a.kind === 'refused') await isolate(halves[0] as WriteOp[], a.refusal, a.failure, ctx, out)
    if (b.kind === 'refused') await isolate(halves[1] as WriteOp[], b.refusal, b.failure, ctx, out)
    return DONE
  }
  // in order: a half that leaves writes to be sent later (not executed after a refused one, or
  // failed otherwise) keeps the half after it from going before them; that half waits with them
  const first = await sendPart(halves[0] as WriteOp[], ctx, out)
  const second = halves[1] as WriteOp[]
  if (first.kind === 'done') return await sendPart(second, ctx, out)
  if (first.kind === 'failed') {
    out.failed(second, first.err)
  } else {
    out.again(second, 0) // still in flight from the refused command: that attempt counts
  }
  return first
}

/** What a part left behind: nothing, writes to send again, or writes failed otherwise (decided as a whole-batch failure). */
type Left = { kind: 'done' } | { kind: 'again' } | { kind: 'failed', err: DriverFailure }
const DONE: Left = { kind: 'done' }
const LEFT_AGAIN: Left = { kind: 'again' }
/** A part refused as a whole command, not transiently: to isolate further. */
interface Refused { kind: 'refused', refusal: DriverFailure, failure: Failure }

async function sendPart (ops: WriteOp[], ctx: IsolationContext, out: Isolation): Promise<Left> {
  const sent = await sendOnce(ops, ctx, out)
  return sent.kind === 'refused' ? await isolate(ops, sent.refusal, sent.failure, ctx, out) : sent
}

/** Whether two refusals carry one server code, one the code table does not know (server-codes.ts). */
function sameUnknownCode (a: DriverFailure, b: DriverFailure): boolean {
  const ca = a.code
  return ca !== undefined && ca === b.code && !knownCode(ca)
}

/** Sends a part once; a refusal of the whole command that is not transient comes back to be isolated (or, for two halves alike, not). */
async function sendOnce (ops: WriteOp[], ctx: IsolationContext, out: Isolation): Promise<Left | Refused> {
  if (ctx.stopped()) {
    out.again(ops, 0)
    return LEFT_AGAIN
  }
  const models = new Array<AnyBulkWriteOperation>(ops.length)
  for (let i = 0; i < ops.length; i++) {
    const op = ops[i] as WriteOp
    op.sentAgainInPart()
    models[i] = op.model
  }
  let result: SentAnswer
  try {
    result = await ctx.send(ops, models)
  } catch (err) {
    const failed = readFailure(err)
    if (failed.kind === 'refusal') {
      const failure = await ctx.classify(failed)
      if (!failure.transient) return { kind: 'refused', refusal: failed, failure }
      out.failed(ops, failed)
      return { kind: 'failed', err: failed }
    }
    if (ctx.closed !== undefined && failed.closedConnection) {
      ctx.closed.at = ctx.clock.now()
      return { kind: 'refused', refusal: failed, failure: unprovenFailure(failed) }
    }
    if (failed.partial !== undefined) {
      if (!indexesProven(ops, ctx.reportsStatements)) return await isolate(ops, failed, unprovenFailure(failed), ctx, out)
      const partial = failed.partial
      const ids = new PartialFailureReader(partial, ctx.ordered, ctx.collection).idsToConfirm(ops)
      return partlyRefused(ops, partial, ctx.ordered, ctx.collection, out, await ctx.confirm(ids)) ? LEFT_AGAIN : DONE
    }
    out.failed(ops, failed)
    return { kind: 'failed', err: failed }
  }
  const upserted = result.upsertedIds
  for (let i = 0; i < ops.length; i++) out.acknowledged(ops[i] as WriteOp, resultOf(ops[i] as WriteOp, i, upserted))
  return DONE
}

/**
 * Some writes of a bulkWrite were refused (`writeErrors`): each write's verdict, told to `out`
 * (the Sender's partial failures and a split part's alike); whether any is to be sent again. `confirmed`: generated _ids found
 * written after an unknown attempt (PartialFailureReader.idsToConfirm).
 */
export function partlyRefused (ops: readonly WriteOp[], err: PartialFailure, ordered: boolean, collection: string, out: Isolation,
  confirmed: Set<string> | null = null): boolean {
  const reader = new PartialFailureReader(err, ordered, collection)
  const again: WriteOp[] = []
  let uncoalesced = 0
  for (let i = 0; i < ops.length; i++) {
    const op = ops[i] as WriteOp
    if (op.state === SETTLED) continue
    const verdict = reader.verdict(op, i, confirmed)
    switch (verdict.kind) {
      case 'acknowledged': out.acknowledged(op, verdict.value); break
      case 'rejected': out.rejected(op, verdict.error); break
      case 'not-executed': op.sendAgain(false); again.push(op); break
      case 'uncoalesce': {
        const parts = op.uncoalesce()
        uncoalesced += parts.length
        again.push(op, ...parts)
        break
      }
    }
  }
  if (again.length === 0) return false
  out.again(again, uncoalesced)
  return true
}

/** What a write the refusal is pinned to (or that may not go again) is told: the server's code, kept. */
function pinned (op: WriteOp, refusal: DriverFailure, outcome: 'rejected' | 'unknown'): Error {
  const err = refusal.error
  if (unprovenStatement(refusal)) {
    // the code is some statement's, not proven this write's: an app mapping it to a 4xx would refuse a request whose write was applied
    return new WriteBufferError(ErrorCodes.BATCH_FAILED, `a statement of its batch was refused (${describeError(err)}) and this server does not say which (isolate.ts#indexesProven); this write may have been applied`, outcome, op.attempts, err)
  }
  if (refusal.closedConnection) {
    return new WriteBufferError(ErrorCodes.BATCH_FAILED, `the connection closed under the commands that carried this write (${describeError(err)}): the server may drop the connection on this write, and it may have been applied (docs/server-behaviours.md: a poison can close the connection)`, outcome, op.attempts, err)
  }
  if (refusal.code !== undefined) {
    return new WriteRejectedError(refusal.code, refusal.message ?? 'write refused', op.attempts, undefined, outcome)
  }
  return new WriteBufferError(ErrorCodes.BATCH_FAILED, `write refused: ${describeError(err)}`, outcome, op.attempts, err)
}
