import { BSON, type Document } from 'mongodb'
import { ErrorCodes } from '../errors.js'
import { statementOf } from './build-op.js'
import { findUnsendable } from './unsendable.js'
import { INSERT, type WriteOp } from './write-op.js'

/** The driver's limit for one statement (see build-op.ts): 16 MiB − 1 bytes can be sent. */
const MAX_BSON_BYTES = 16 * 1024 * 1024

/**
 * Why the driver cannot send this write now, or undefined. Asked only after the serializer
 * threw at send time for a whole batch (nothing was sent): a write checked at submit can stop
 * being sendable when its caller changes the document afterwards (a key with a NUL byte added,
 * a getter that grows past 16 MiB or throws, a Map given a number key). Serializes the
 * statement the driver would build, exactly; whatever reading it throws is the answer.
 */
export function sendProblem (op: WriteOp): string | undefined {
  const body = op.body
  const statement: Document = op.kind === INSERT ? body.document as Document : statementOf(op.kind, body)
  let bytes: number
  try {
    const found = findUnsendable(statement)
    if (found !== undefined) return found
    bytes = BSON.serialize(statement, { ignoreUndefined: false, serializeFunctions: false }).byteLength
  } catch (err) {
    return (err as Error | null)?.message ?? String(err)
  }
  return bytes >= MAX_BSON_BYTES ? `the statement is ${bytes} bytes, over the 16 MiB BSON document limit` : undefined
}

/** How a bulkWrite's failure reads as a send-time serializer failure (serializerFailure). */
export const NOT_SERIALIZER = 0
/** the driver's or js-bson's own error, raised while building or serializing the bulkWrite, before any I/O */
export const SERIALIZER = 1
/** maybe the serializer's: read so only if a write of the batch is found unsendable now (sendProblem) */
export const SERIALIZER_IF_FOUND = 2

/** Node's errors of a socket or stream: the connection's, not the serializer's. */
const STREAM_ERROR = /^(E[A-Z]+|ERR_STREAM_.*|ERR_SOCKET_.*)$/

/**
 * Whether a failed bulkWrite is its serializer's. The driver's own client-side errors
 * (BSONError, MongoInvalidArgumentError, RangeError) are. So may be any error that is neither
 * the driver's, the server's nor a socket's: the serializer runs the caller's code (a getter,
 * a `toBSON()`, a Proxy trap that throws only at send time) and Node's (a Map's number key:
 * TypeError ERR_INVALID_ARG_TYPE), which throw their own errors. Those are read so only when a
 * write of the batch cannot be serialized now, and never where the driver may have resent the
 * batch on its own (`driverMayHaveRetried`): it serializes again for its retry, so the error
 * may come after a first attempt that went out (and may have applied).
 */
export function serializerFailure (err: unknown, driverMayHaveRetried: boolean): number {
  if (isClientSideSendError(err)) return SERIALIZER
  if (driverMayHaveRetried) return NOT_SERIALIZER
  if (err === null || typeof err !== 'object') return SERIALIZER_IF_FOUND // thrown by the caller's code: the driver throws Errors
  const e = err as { name?: unknown, code?: unknown, syscall?: unknown, errorLabels?: unknown, writeConcernError?: unknown }
  if (typeof e.name === 'string' && e.name.startsWith('Mongo')) return NOT_SERIALIZER
  // a server code (a write concern error of the insert command: write-command.ts), a socket's error
  if (typeof e.code === 'number' || e.syscall !== undefined || e.errorLabels !== undefined || e.writeConcernError !== undefined) return NOT_SERIALIZER
  return typeof e.code === 'string' && STREAM_ERROR.test(e.code) ? NOT_SERIALIZER : SERIALIZER_IF_FOUND
}

/**
 * Whether afterUnsendable (buffer/outcomes.ts) found a write of the batch unsendable now: its
 * refusals are then INVALID_WRITE; having found none it fails them all (BATCH_FAILED,
 * not-sent), which only the serializer's own error (SERIALIZER) proves.
 */
export function foundUnsendable (refused: ReadonlyArray<{ err: Error }>): boolean {
  return refused.some(r => (r.err as { code?: unknown }).code === ErrorCodes.INVALID_WRITE)
}

/** An error the driver raises while building or serializing a bulkWrite, before any I/O. */
export function isClientSideSendError (err: unknown): boolean {
  const name = (err as { name?: unknown } | null)?.name
  return name === 'BSONError' || name === 'BSONVersionError' || name === 'MongoInvalidArgumentError' || err instanceof RangeError
}
