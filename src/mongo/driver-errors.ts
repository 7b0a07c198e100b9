import { describe, type WriteOutcome } from '../errors.js'
import { ruleOf } from './server-codes.js'

export interface Failure {
  /** what the failure says about the writes of the batch */
  outcome: WriteOutcome
  /** worth trying again (network, server selection, primary change) */
  transient: boolean
  /** the underlying driver error */
  error: unknown
}

interface MaybeMongoError {
  name?: string
  code?: unknown
  errorResponse?: unknown
  writeErrors?: unknown[]
  hasErrorLabel?: (label: string) => boolean
}

/**
 * The server's error labels the buffer reads (as the driver's MongoErrorLabel names them; the
 * overload ones are newer than the oldest driver the package supports).
 */
export const Label = Object.freeze({
  /** the driver (or server) says this failure may be retried as a retryable write */
  RetryableWriteError: 'RetryableWriteError',
  /** the server's word that the command, and any retry of it, applied nothing */
  NoWritesPerformed: 'NoWritesPerformed',
  /** MongoDB 8.x: the server shed the command under load */
  SystemOverloadedError: 'SystemOverloadedError',
  /** with SystemOverloadedError: refused before running, safe to send again */
  RetryableError: 'RetryableError',
} as const)

/** A label the buffer reads (Label's values). */
export type LabelName = typeof Label[keyof typeof Label]

/** A write error as the server sends it, by the index of its statement (a bulkWrite's and a write command's alike). */
export interface ServerWriteError { index: number, code: number, errmsg?: string, errInfo?: unknown }

/** A failure that names refused writes by index: a partly failed bulkWrite, or a write command's CommandWriteErrors. */
export interface PartialFailure {
  writeErrors: ServerWriteError[]
  result?: { upsertedIds?: Record<number, unknown>, getWriteConcernError?: () => { errmsg?: string, code?: number } | undefined }
}

// MongoDB 8.x admission control: the server refused the command before executing it
// (IngressRequestRateLimitExceeded 462, and any overload refusal labelled SystemOverloadedError
// *and* RetryableError). InterruptedDueToOverload (473) carries SystemOverloadedError without
// RetryableError: the server killed a command it was running, which may have applied part of it.
/** The server's codes the buffer reads by number (the rest are server-codes.ts's table). */
export const ServerCode = Object.freeze({
  /** InvalidLength: a command with no statements, or more than the server's write batch bound */
  INVALID_LENGTH: 16,
  /** IngressRequestRateLimitExceeded (8.x admission control): refused before running */
  OVERLOADED: 462,
  /** 8.x admission control's other refusal under load */
  OVERLOAD_REFUSED: 463,
  /** InterruptedDueToOverload (8.x): a running command killed to shed load, maybe partly applied */
  INTERRUPTED_DUE_TO_OVERLOAD: 473,
} as const)

/** the codes of a server shedding load: refused (462, 463) or interrupted (473) */
const OVERLOAD_CODES: ReadonlySet<number> = new Set([ServerCode.OVERLOADED, ServerCode.OVERLOAD_REFUSED, ServerCode.INTERRUPTED_DUE_TO_OVERLOAD])

/**
 * A socket's own error that reaches us unwrapped: the driver (mongodb 7.9) rethrows the
 * socket's 'error' as it is when a command was waiting for 'drain' (`write ECONNRESET`,
 * `write EPIPE`), not as a MongoNetworkError. It is the same failure: the connection broke
 * while the command was being sent, so the server may have received it.
 */
const SOCKET_ERROR_CODES = new Set([
  'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ECONNABORTED', 'ENOTCONN', 'ENETDOWN', 'ENETUNREACH', 'EHOSTUNREACH',
  'ERR_STREAM_DESTROYED', 'ERR_STREAM_WRITE_AFTER_END', 'ERR_SOCKET_CLOSED',
])

/** The error's name, a socket's own error named as the network error it is (see SOCKET_ERROR_CODES). */
function nameOf (e: MaybeMongoError | null | undefined): string {
  const name = e?.name ?? ''
  return !name.startsWith('Mongo') && typeof e?.code === 'string' && SOCKET_ERROR_CODES.has(e.code) ? 'MongoNetworkError' : name
}

/**
 * A MongoBulkWriteError caused by a network failure has an empty `writeErrors` and wraps
 * the real error in `errorResponse`; unwrap it before deciding anything.
 */
function unwrap (err: unknown): MaybeMongoError | null | undefined {
  const e = err as MaybeMongoError | null | undefined
  if (e?.name === 'MongoBulkWriteError' && e.errorResponse instanceof Error) return e.errorResponse
  return e
}

/** A MongoBulkWriteError carrying the server's `{ ok: 0 }` reply: the whole command was refused. */
function isCommandError (e: MaybeMongoError): boolean {
  const r = e.errorResponse as { ok?: unknown } | null | undefined
  return e.name === 'MongoServerError' || (e.name === 'MongoBulkWriteError' && r !== null && typeof r === 'object' && r.ok === 0)
}

/** What a failure is: the server refused the whole command (`ok: 0`), refused some writes (`writeErrors`), or anything else. */
export type FailureKind = 'refusal' | 'write-errors' | 'other'

/** What the driver's bulk result says was done, read for progress. */
interface BulkCounts { insertedCount?: number, matchedCount?: number, deletedCount?: number, upsertedCount?: number }

/**
 * The library's view of whatever the driver threw: the one place that reads the thrown value
 * (unwraps it, names it, reads its code, labels, write errors and reply); everything else reads
 * this view. Read once per failed batch (or isolated part), never per write.
 *
 * Errors are told apart by `name`, never `instanceof`: several copies of the driver may be
 * loaded at once (its CJS and ESM builds, a user's own mongodb beside ours), and an error of
 * one is no instance of another's classes.
 */
export class DriverFailure {
  readonly kind: FailureKind
  /**
   * The error users see for this failure (the `cause` of what they are told): as thrown — or,
   * for a command refusal the driver shaped as a write error at index 0 (see below), the
   * command's own error, its `cause` the thrown one.
   */
  readonly error: unknown
  /** the error's name (a MongoBulkWriteError's wrapped network error unwrapped; a socket's own error named MongoNetworkError) */
  readonly name: string
  /** the server's code, if numeric */
  readonly code: number | undefined
  /** the server's message (a refusal's `errmsg`), if any */
  readonly message: string | undefined
  /** the refused writes by index, when kind is 'write-errors' (the thrown error itself) */
  readonly partial: PartialFailure | undefined
  /** InvalidLength's "Write batch sizes must be between 1 and N": N (the function writeBatchBound, below) */
  readonly writeBatchBound: number | undefined
  /** the connection closed under the command (a network error that is not a timeout, or a socket's own error) */
  readonly closedConnection: boolean
  /** the server answered that it is overloaded (462, 463, 473, SystemOverloadedError) */
  readonly overload: boolean
  /** the error as classify reads it (unwrapped): a Failure's `error` */
  readonly #read: unknown
  /** the reply was the server's `ok: 0` (MongoServerError, or a MongoBulkWriteError carrying one) */
  readonly #commandError: boolean
  /** the error whose labels are read */
  readonly #labelled: MaybeMongoError | null | undefined
  /** the bulk result showed progress: part of the batch was applied */
  readonly #progress: boolean

  constructor (thrown: unknown) {
    const raw = thrown as (MaybeMongoError & { message?: unknown, result?: BulkCounts & { ok?: unknown } }) | null | undefined
    const writeErrors = raw?.writeErrors
    const hasWriteErrors = Array.isArray(writeErrors) && writeErrors.length > 0
    const first = hasWriteErrors ? writeErrors[0] as { index?: unknown, code?: unknown, errmsg?: unknown } | undefined : undefined
    // A command the server answered `{ ok: 0 }` (unauthorized, MaxTimeMSExpired, overloaded…)
    // comes back from the driver as if it were a write error at index 0, with the bulk result's
    // `ok` at 0 (the driver's mergeBatchResults). It is the whole command's failure, not the
    // first write's: read as the command error it is.
    if (raw?.result?.ok === 0 && writeErrors?.length === 1 && first?.index === 0) {
      this.kind = 'refusal'
      this.name = 'MongoServerError'
      this.code = typeof first.code === 'number' ? first.code : undefined
      this.message = typeof first.errmsg === 'string' ? first.errmsg : 'command failed'
      this.#commandError = true
      this.#progress = false
      this.#labelled = raw
      this.partial = undefined
      // what users are told of it (kept as it was: the command's own error, its cause the thrown one)
      const refusal = Object.assign(new Error(this.message, { cause: thrown }), {
        code: first.code,
        errorResponse: { ok: 0, code: first.code, errmsg: first.errmsg },
        hasErrorLabel: (label: string) => raw.hasErrorLabel?.(label) === true,
      })
      Object.defineProperty(refusal, 'name', { value: 'MongoServerError' })
      this.error = refusal
      this.#read = refusal
    } else {
      const e = unwrap(thrown)
      this.#labelled = e
      this.name = nameOf(e)
      this.code = typeof e?.code === 'number' ? e.code : undefined
      this.message = typeof (e as { message?: unknown } | null | undefined)?.message === 'string' ? (e as { message: string }).message : undefined
      this.#commandError = e !== null && e !== undefined && isCommandError(e)
      this.kind = hasWriteErrors ? 'write-errors' : this.code !== undefined && this.#commandError ? 'refusal' : 'other'
      this.partial = hasWriteErrors ? thrown as PartialFailure : undefined
      const r = raw?.result
      this.#progress = r !== undefined && (r.insertedCount ?? 0) + (r.matchedCount ?? 0) + (r.deletedCount ?? 0) + (r.upsertedCount ?? 0) > 0
      this.error = thrown
      this.#read = e ?? {}
    }
    this.closedConnection = this.name === 'MongoNetworkError'
    this.overload = (this.code !== undefined && OVERLOAD_CODES.has(this.code)) || this.hasLabel(Label.SystemOverloadedError)
    this.writeBatchBound = writeBatchBound(this.code, this.message)
  }

  /** Whether the server (or the driver) put `label` on the error. */
  hasLabel (label: LabelName): boolean {
    return this.#labelled?.hasErrorLabel?.(label) === true
  }

  /**
   * What the failure means for the writes of the batch, as a whole.
   * `driverMayRetry`: the driver's own retryable writes are on for this deployment (replica
   * set / sharded). Then a "never sent" error such as server selection may be the answer to
   * the driver's *second* attempt, after a first one that was possibly applied — unless the
   * server labelled it NoWritesPerformed. Such errors are 'unknown' (still transient).
   */
  classify (driverMayRetry: boolean, everConnected = true, serverIsMongoDB = false): Failure {
    const notSent: WriteOutcome = driverMayRetry && !this.hasLabel(Label.NoWritesPerformed) ? 'unknown' : 'not-sent'
    const f = this.#classify(notSent, everConnected, serverIsMongoDB)
    // belt and braces: a result that shows progress means part of the batch was applied
    return f.outcome === 'not-sent' && this.#progress ? { ...f, outcome: 'unknown' } : f
  }

  #classify (notSent: WriteOutcome, everConnected: boolean, serverIsMongoDB: boolean): Failure {
    const error = this.#read
    switch (this.name) {
      case 'MongoServerSelectionError':
      case 'MongoPoolClearedError':
      case 'MongoWaitQueueTimeoutError':
        return { outcome: notSent, transient: true, error }
      case 'MongoNotConnectedError':
        return { outcome: 'not-sent', transient: false, error }
      case 'MongoTopologyClosedError':
      case 'MongoClientClosedError':
      case 'MongoPoolClosedError':
        // the client was closed under us: the command may have been on the wire, and the
        // server applies what it received (measured: a batch reported so had been applied) —
        // unless no server was ever reached (a first connect that failed closes the topology)
        return { outcome: everConnected ? 'unknown' : 'not-sent', transient: false, error }
      case 'MongoNetworkError':
      case 'MongoNetworkTimeoutError':
        return { outcome: 'unknown', transient: true, error }
      case 'MongoOperationTimeoutError':
        return { outcome: 'unknown', transient: false, error }
    }
    const code = this.code
    if (this.name === 'MongoServerError' || (this.name === 'MongoBulkWriteError' && code !== undefined)) {
      // a command-level answer from the server, or (a MongoBulkWriteError without an
      // `ok: 0` reply) a write concern error: applied, but not as durably as asked
      if (!this.#commandError) return { outcome: 'unknown', transient: false, error }
      // The whole command was refused. Nothing of it was applied only if MongoDB itself raised
      // a code it raises before running any statement (server-codes.ts); anything else may have
      // come after some statements were applied (docs/server-behaviours.md: `ok: 0` does not prove nothing was applied): ambiguous.
      const overloaded = code === ServerCode.OVERLOADED ||
        (this.hasLabel(Label.SystemOverloadedError) && this.hasLabel(Label.RetryableError) && code !== ServerCode.INTERRUPTED_DUE_TO_OVERLOAD)
      const rule = overloaded ? ruleOf(ServerCode.OVERLOADED) : ruleOf(code)
      const transient = rule.transient || this.hasLabel(Label.RetryableWriteError)
      // NoWritesPerformed: the server's own word that this command (and any retry) applied nothing
      if (this.hasLabel(Label.NoWritesPerformed) || (rule.when === 'before' && serverIsMongoDB)) {
        // refused before running: a transient refusal (not primary, overloaded) was not applied
        // — unless it answers the driver's own retry of an attempt that was (notSent says so)
        return { outcome: transient ? notSent : 'rejected', transient, error }
      }
      return { outcome: 'unknown', transient, error }
    }
    return { outcome: 'unknown', transient: false, error }
  }
}

/** Reads what the driver threw (once per failed batch): see DriverFailure. */
export function readFailure (thrown: unknown): DriverFailure {
  return new DriverFailure(thrown)
}

/** One line for logs and error messages: `Name code: message`. */
export function describeError (err: unknown): string {
  const e = err as { name?: string, message?: string, code?: unknown } | null | undefined
  const code = typeof e?.code === 'number' || typeof e?.code === 'string' ? ` ${e.code}` : ''
  return `${e?.name ?? 'Error'}${code}: ${e?.message ?? describe(err)}`
}

/**
 * The bound a refusal for too many writes names: InvalidLength (16) with "Write batch sizes must
 * be between 1 and N" — MongoDB's text (write_ops.cpp, checkOpCountForCommand) and DocumentDB's
 * (insert.c, update.c, delete.c: MaxWriteBatchSize, 25,000 by default, though its hello says
 * 100,000). Both raise it while reading the command, before any statement runs. Undefined for
 * any other failure.
 */
function writeBatchBound (code: number | undefined, message: string | undefined): number | undefined {
  if (code !== ServerCode.INVALID_LENGTH) return undefined
  const m = /Write batch sizes must be between 1 and (\d+)/.exec(String(message))
  const bound = m === null ? NaN : Number(m[1])
  return Number.isSafeInteger(bound) && bound > 0 ? bound : undefined
}
