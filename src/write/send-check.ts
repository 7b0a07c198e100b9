import { BSON, type Document } from 'mongodb'
import { statementOf } from './build-op.js'
import { findUnsendable } from './unsendable.js'
import { INSERT, type WriteOp } from './write-op.js'

/** The driver's limit for one statement (see build-op.ts): 16 MiB − 1 bytes can be sent. */
const MAX_BSON_BYTES = 16 * 1024 * 1024

/**
 * Why the driver cannot send this write now, or undefined. Asked only after the serializer
 * threw at send time for a whole batch (nothing was sent): a write checked at submit can stop
 * being sendable when its caller changes the document afterwards (a key with a NUL byte added,
 * a getter that grows past 16 MiB). Serializes the statement the driver would build, exactly.
 */
export function sendProblem (op: WriteOp): string | undefined {
  const body = op.body
  const statement: Document = op.kind === INSERT ? body.document as Document : statementOf(op.kind, body)
  const found = findUnsendable(statement)
  if (found !== undefined) return found
  let bytes: number
  try {
    bytes = BSON.serialize(statement, { ignoreUndefined: false, serializeFunctions: false }).byteLength
  } catch (err) {
    return (err as Error | null)?.message ?? String(err)
  }
  return bytes >= MAX_BSON_BYTES ? `the statement is ${bytes} bytes, over the 16 MiB BSON document limit` : undefined
}

/** An error the driver raises while building or serializing a bulkWrite, before any I/O. */
export function isClientSideSendError (err: unknown): boolean {
  const name = (err as { name?: unknown } | null)?.name
  return name === 'BSONError' || name === 'BSONVersionError' || name === 'MongoInvalidArgumentError' || err instanceof RangeError
}
