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

/** A write error as the server sends it, by the index of its statement (a bulkWrite's and a write command's alike). */
export interface ServerWriteError { index: number, code: number, errmsg?: string, errInfo?: unknown }

/** A failure that names refused writes by index: a partly failed bulkWrite, or a write command's CommandWriteErrors. */
export interface PartialFailure {
  writeErrors: ServerWriteError[]
  result?: { upsertedIds?: Record<number, unknown>, getWriteConcernError?: () => { errmsg?: string, code?: number } | undefined }
}

/** Whether `err` names refused writes (`writeErrors`, at least one): the one place that reads the field off whatever was thrown. */
export function hasWriteErrors (err: unknown): err is PartialFailure {
  const writeErrors = (err as { writeErrors?: unknown } | null | undefined)?.writeErrors
  return Array.isArray(writeErrors) && writeErrors.length > 0
}

// MongoDB 8.x admission control: the server refused the command before executing it
// (IngressRequestRateLimitExceeded 462, and any overload refusal labelled SystemOverloadedError
// *and* RetryableError). InterruptedDueToOverload (473) carries SystemOverloadedError without
// RetryableError: the server killed a command it was running, which may have applied part of it.
const OVERLOADED = 462
const INTERRUPTED_DUE_TO_OVERLOAD = 473
/** the codes of a server shedding load: refused (462, 463) or interrupted (473) */
const OVERLOAD_CODES: ReadonlySet<number> = new Set([OVERLOADED, 463, INTERRUPTED_DUE_TO_OVERLOAD])
/** InvalidLength: a command with no statements, or more than the server's write batch bound */
const INVALID_LENGTH = 16

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
function unwrap (err: unknown): unknown {
  const e = err as MaybeMongoError | null | undefined
  if (e?.name === 'MongoBulkWriteError' && e.errorResponse instanceof Error) return e.errorResponse
  return err
}

/** A MongoBulkWriteError carrying the server's `{ ok: 0 }` reply: the whole command was refused. */
function isCommandError (e: MaybeMongoError): boolean {
  const r = e.errorResponse as { ok?: unknown } | null | undefined
  return e.name === 'MongoServerError' || (e.name === 'MongoBulkWriteError' && r !== null && typeof r === 'object' && r.ok === 0)
}

/**
 * A command the server answered `{ ok: 0 }` (unauthorized, MaxTimeMSExpired, overloaded…)
 * comes back from the driver as if it were a write error at index 0, with the bulk result's
 * `ok` at 0 (the driver's mergeBatchResults). It is the whole command's failure, not the
 * first write's: this returns it as the command error it is, or undefined for a real
 * per-write failure.
 */
export function commandRefusal (err: unknown): unknown {
  const e = err as { writeErrors?: unknown[], result?: { ok?: unknown } } | null | undefined
  const first = e?.writeErrors?.[0] as { index?: unknown, code?: unknown, errmsg?: unknown, errInfo?: unknown } | undefined
  if (e?.result?.ok !== 0 || e.writeErrors?.length !== 1 || first?.index !== 0) return undefined
  const refusal = Object.assign(new Error(typeof first.errmsg === 'string' ? first.errmsg : 'command failed', { cause: err }), {
    code: first.code,
    errorResponse: { ok: 0, code: first.code, errmsg: first.errmsg },
    hasErrorLabel: (label: string) => (err as MaybeMongoError).hasErrorLabel?.(label) === true,
  })
  Object.defineProperty(refusal, 'name', { value: 'MongoServerError' })
  return refusal
}

/**
 * Classifies an error that failed a whole bulkWrite (no per-op writeErrors).
 * `driverMayRetry`: the driver's own retryable writes are on for this deployment (replica
 * set / sharded). Then a "never sent" error such as server selection may be the answer to
 * the driver's *second* attempt, after a first one that was possibly applied — unless the
 * server labelled it NoWritesPerformed. Such errors are 'unknown' (still transient).
 */
export function classify (err: unknown, driverMayRetry: boolean, everConnected = true, serverIsMongoDB = false): Failure {
  const e = unwrap(err) as MaybeMongoError | null | undefined
  const name = nameOf(e)
  const noWrites = e?.hasErrorLabel?.(Label.NoWritesPerformed) === true
  const notSent: WriteOutcome = driverMayRetry && !noWrites ? 'unknown' : 'not-sent'
  const f = classifyError(e ?? {}, name, notSent, everConnected, serverIsMongoDB)
  // belt and braces: a result that shows progress means part of the batch was applied
  const r = (err as { result?: { insertedCount?: number, matchedCount?: number, deletedCount?: number, upsertedCount?: number } } | null | undefined)?.result
  if (f.outcome === 'not-sent' && r !== undefined &&
    (r.insertedCount ?? 0) + (r.matchedCount ?? 0) + (r.deletedCount ?? 0) + (r.upsertedCount ?? 0) > 0) {
    return { ...f, outcome: 'unknown' }
  }
  return f
}

/** Whether a failure is the server's answer refusing the whole command (`ok: 0`), not a write concern error or a client-side one. */
export function isServerRefusal (err: unknown): boolean {
  const e = unwrap(err) as MaybeMongoError | null | undefined
  return e !== null && e !== undefined && typeof e.code === 'number' && isCommandError(e)
}

function classifyError (e: MaybeMongoError, name: string, notSent: WriteOutcome, everConnected: boolean, serverIsMongoDB: boolean): Failure {
  const noWrites = e.hasErrorLabel?.(Label.NoWritesPerformed) === true
  switch (name) {
    case 'MongoServerSelectionError':
    case 'MongoPoolClearedError':
    case 'MongoWaitQueueTimeoutError':
      return { outcome: notSent, transient: true, error: e }
    case 'MongoNotConnectedError':
      return { outcome: 'not-sent', transient: false, error: e }
    case 'MongoTopologyClosedError':
    case 'MongoClientClosedError':
    case 'MongoPoolClosedError':
      // the client was closed under us: the command may have been on the wire, and the
      // server applies what it received (measured: a batch reported so had been applied) —
      // unless no server was ever reached (a first connect that failed closes the topology)
      return { outcome: everConnected ? 'unknown' : 'not-sent', transient: false, error: e }
    case 'MongoNetworkError':
    case 'MongoNetworkTimeoutError':
      return { outcome: 'unknown', transient: true, error: e }
    case 'MongoOperationTimeoutError':
      return { outcome: 'unknown', transient: false, error: e }
  }
  const code = typeof e.code === 'number' ? e.code : undefined
  if (name === 'MongoServerError' || (name === 'MongoBulkWriteError' && code !== undefined)) {
    // a command-level answer from the server, or (a MongoBulkWriteError without an
    // `ok: 0` reply) a write concern error: applied, but not as durably as asked
    if (!isCommandError(e)) return { outcome: 'unknown', transient: false, error: e }
    // The whole command was refused. Nothing of it was applied only if MongoDB itself raised
    // a code it raises before running any statement (server-codes.ts); anything else may have
    // come after some statements were applied (docs/server-behaviours.md: `ok: 0` does not prove nothing was applied): ambiguous.
    const overloaded = code === OVERLOADED ||
      (e.hasErrorLabel?.(Label.SystemOverloadedError) === true && e.hasErrorLabel(Label.RetryableError) && code !== INTERRUPTED_DUE_TO_OVERLOAD)
    const rule = overloaded ? ruleOf(OVERLOADED) : ruleOf(code)
    const transient = rule.transient || e.hasErrorLabel?.(Label.RetryableWriteError) === true
    // NoWritesPerformed: the server's own word that this command (and any retry) applied nothing
    if (noWrites || (rule.when === 'before' && serverIsMongoDB)) {
      // refused before running: a transient refusal (not primary, overloaded) was not applied
      // — unless it answers the driver's own retry of an attempt that was (notSent says so)
      return { outcome: transient ? notSent : 'rejected', transient, error: e }
    }
    return { outcome: 'unknown', transient, error: e }
  }
  return { outcome: 'unknown', transient: false, error: e }
}

/**
 * Whether the server answered that it is overloaded: an overload code (462, 463, 473) or the
 * `SystemOverloadedError` label, however the driver wrapped it. What it means for the writes is
 * `classify`'s; this says only that the server asks for less (the in-flight limit halves).
 */
export function isOverload (err: unknown): boolean {
  const e = unwrap(err) as MaybeMongoError | null | undefined
  if (e === null || e === undefined) return false
  return (typeof e.code === 'number' && OVERLOAD_CODES.has(e.code)) || e.hasErrorLabel?.(Label.SystemOverloadedError) === true
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
export function writeBatchBoundOf (err: unknown): number | undefined {
  const e = unwrap(err) as MaybeMongoError | null | undefined
  if (e === null || e === undefined || e.code !== INVALID_LENGTH) return undefined
  const m = /Write batch sizes must be between 1 and (\d+)/.exec(String((e as { message?: unknown }).message))
  const bound = m === null ? NaN : Number(m[1])
  return Number.isSafeInteger(bound) && bound > 0 ? bound : undefined
}

/**
 * Whether the connection closed under the command (a network error that is not a timeout, or a
 * socket's own error): what a server that drops the connection on a document it cannot take does
 * (FerretDB 1.24 on NaN: docs/server-behaviours.md: a poison can close the connection), as a cut does.
 */
export function closedConnection (err: unknown): boolean {
  return nameOf(unwrap(err) as MaybeMongoError | null | undefined) === 'MongoNetworkError'
}
