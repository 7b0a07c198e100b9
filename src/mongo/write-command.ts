import { Db, MongoWriteConcernError, WriteConcern, type BulkWriteResult, type Collection, type Document, type WriteConcernSettings } from 'mongodb'
import { statementOf } from '../write/build-op.js'
import { COMMAND_OF, INSERT, METHOD_OF, UPDATE_MANY, UPDATE_ONE, type WriteOp } from '../write/write-op.js'
import type { ServerWriteError } from './driver-errors.js'

/** All the Sender reads of an acknowledged batch: its upserts, by the index of the write in the batch. */
export type SentAnswer = Pick<BulkWriteResult, 'upsertedIds'>

const NO_UPSERTS: SentAnswer = Object.freeze({ upsertedIds: Object.freeze({}) })

/** as it comes in the reply: numbers, or Int32 objects if the client reads replies with promoteValues: false */
interface RawWriteError { index: unknown, code: unknown, errmsg?: string, errInfo?: Document }
interface ConcernError { code?: number, errmsg?: string }
interface WriteReply { writeErrors?: RawWriteError[], writeConcernError?: ConcernError, upserted?: Array<{ index: unknown, _id: unknown }> }

/**
 * Some writes of the command were refused (`ok: 1` with `writeErrors`): what the Sender reads
 * of a partly failed bulkWrite (outcomes.ts, PartialFailure) — the server's write errors, which
 * name the refused writes by index, and the write concern error that came with them, if any.
 */
export class CommandWriteErrors extends Error {
  override get name (): string { return 'CommandWriteErrors' }
  /** the first refused write's code (a partly failed bulkWrite's error has it too) */
  readonly code: number
  readonly writeErrors: ServerWriteError[]
  readonly result: { upsertedIds: Record<number, unknown>, getWriteConcernError: () => ConcernError | undefined }

  constructor (errors: RawWriteError[], concern: ConcernError | undefined, upsertedIds: Record<number, unknown> = {}) {
    const first = errors[0] as RawWriteError
    super(`${errors.length} write(s) refused, the first: ${first.errmsg ?? `code ${String(first.code)}`}`)
    this.code = Number(first.code)
    // as numbers, as the driver gives a bulkWrite's (whatever BSON options read the reply)
    this.writeErrors = errors.map(e => ({ ...e, index: Number(e.index), code: Number(e.code) }))
    this.result = { upsertedIds, getWriteConcernError: () => concern }
  }
}

/**
 * The most estimated BSON bytes a batch sent as one write command may hold. Its statements
 * travel inside the command body, which the server takes up to 16 MiB + 16 KiB (and the
 * driver's serializer up to 17 MiB), not as a document sequence that a bulkWrite splits. A
 * quarter of that (bson-size.ts's estimates are never short). Larger batches go as bulkWrites.
 */
export const INLINE_MAX_BYTES = 4 * 1024 * 1024

/**
 * Sends a batch as the one write command (`insert`, `update` or `delete`) an unordered (or
 * ordered) bulkWrite of it is on the wire, through `db.command`, for two reasons:
 *
 * - **The driver never sends it again on its own.** A bulkWrite on a replica set is a
 *   retryable write: the driver resends a failed one once, with the same `lsid` + `txnNumber`.
 *   That is exactly-once only on a server that honours the txnNumber (MongoDB); a server that
 *   only *says* it is a replica set applies a late first attempt after the resend, and after a
 *   later acknowledged write to the same document (docs/server-behaviours.md: a replica set in name only: 200 of 200 rounds). A command
 *   through `db.command` is not retried (except after an overload refusal labelled
 *   `SystemOverloadedError` + `RetryableError`, which applied nothing), so a failure means what
 *   it says and the buffer's own fence and retry rules decide (wire.ts says when).
 * - **Less CPU.** The driver's bulk layer around the same command (its operation list, a second
 *   size walk of every document, the inserted-id map, the BulkWriteResult) costs app CPU per
 *   write at the batch sizes a busy route makes (bench/README.md, *Measured costs behind constants*).
 *
 * Only batches small enough for one command body (INLINE_MAX_BYTES) go this way.
 *
 * The answer comes back in the shapes a bulkWrite's has, so the Sender and outcomes.ts read
 * one: acknowledged → the upserted ids by index; refused writes → CommandWriteErrors; the
 * whole command refused (`ok: 0`) → the driver's MongoServerError, as a bulkWrite's refusal is
 * read; the write concern not met with no write refused → the driver's MongoWriteConcernError
 * (outcome unknown, as a bulkWrite's). Network and client-side errors are the driver's own.
 */
export class WriteCommand {
  readonly #db: Db
  /** the buffer's writeConcern option, when given: it replaces the collection's, as in a bulkWrite */
  readonly #writeConcern: WriteConcern | undefined
  /** sent with every command, as with every bulkWrite (the fence counts on it) */
  readonly #maxTimeMS: number
  /** per collection: the write concern document to send, and the BSON options to serialize with */
  readonly #options = new WeakMap<Collection, { writeConcern: Document | undefined, bson: Document }>()

  private constructor (db: Db, writeConcern: WriteConcernSettings | undefined, maxTimeMS: number) {
    this.#db = db
    this.#writeConcern = WriteConcern.fromOptions({ writeConcern })
    this.#maxTimeMS = maxTimeMS
  }

  /** For a driver Db; undefined for anything else (a stub, a wrapper): its batches go as bulkWrites. */
  static for (db: Db, writeConcern: WriteConcernSettings | undefined, maxTimeMS: number): WriteCommand | undefined {
    return db instanceof Db ? new WriteCommand(db, writeConcern, maxTimeMS) : undefined
  }

  /**
   * Whether a batch of these writes goes as one write command: within INLINE_MAX_BYTES, and
   * (`insertsOnly`) inserts only. A batch holds one command's writes (select.ts). O(batch).
   */
  static covers (ops: readonly WriteOp[], insertsOnly: boolean): boolean {
    let bytes = 0
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i] as WriteOp
      if (insertsOnly && op.kind !== INSERT) return false
      bytes += op.bytes + op.carried // the updates coalesced into it travel in its statement
    }
    return bytes <= INLINE_MAX_BYTES
  }

  /** Sends the batch's writes, all of one command (in order: index i answers for ops[i]). */
  send (collection: Collection, ops: readonly WriteOp[], ordered: boolean): Promise<SentAnswer> {
    const { writeConcern, bson } = this.#optionsOf(collection)
    const command = commandOf(collection.collectionName, ops)
    command.ordered = ordered
    command.maxTimeMS = this.#maxTimeMS
    if (writeConcern !== undefined) command.writeConcern = writeConcern
    return this.#db.command(command, bson).then(acknowledged, failed)
  }

  #optionsOf (collection: Collection): { writeConcern: Document | undefined, bson: Document } {
    let options = this.#options.get(collection)
    if (options === undefined) {
      const wc = this.#writeConcern ?? collection.writeConcern
      options = {
        writeConcern: wc === undefined ? undefined : (WriteConcern.apply({}, wc) as { writeConcern: Document }).writeConcern,
        // db.command inherits no BSON options. Only those that shape what is sent are the
        // collection's, as in its bulkWrite (checkKeys is off for writes either way; functions
        // are never stored, as BSON code, in any bulkWrite of ours); the reply is read with
        // the defaults, as the driver reads a bulkWrite's (promoteValues: false would give the
        // write errors' indexes as Int32 objects)
        bson: { ignoreUndefined: collection.bsonOptions.ignoreUndefined === true, serializeFunctions: false },
      }
      this.#options.set(collection, options)
    }
    return options
  }
}

/**
 * The write command of these writes (one command's: select.ts), as the driver's bulk layer builds
 * it from their models (bulk/common.ts, operations/update.ts, operations/delete.ts): `documents` of
 * an insert; `updates` and `deletes` of the statements build-op.ts#statementOf makes (and measures)
 * as the driver does. The caller adds ordered, maxTimeMS and the write concern.
 */
export function commandOf (name: string, ops: readonly WriteOp[]): Document {
  const c = COMMAND_OF[(ops[0] as WriteOp).kind] as number
  const statements = new Array<Document>(ops.length)
  for (let i = 0; i < ops.length; i++) {
    const op = ops[i] as WriteOp
    if (COMMAND_OF[op.kind] !== c) throw new TypeError(`a write command holds one kind of write: ${METHOD_OF[(ops[0] as WriteOp).kind]} and ${METHOD_OF[op.kind]} in one batch`)
    statements[i] = op.kind === INSERT ? op.body.document as Document : statementOf(op.kind, op.body)
  }
  if (c === COMMAND_OF[INSERT]) return { insert: name, documents: statements }
  return c === COMMAND_OF[UPDATE_ONE] || c === COMMAND_OF[UPDATE_MANY] ? { update: name, updates: statements } : { delete: name, deletes: statements }
}

/**
 * What a reply the driver resolved with means. A write concern error in it is read here too:
 * the driver throws one as MongoWriteConcernError (failed() below), but a driver that did not
 * (before throwIfWriteConcernError) would hand it over in the reply, and it must not read as
 * acknowledged.
 */
export function acknowledged (reply: Document): SentAnswer {
  const { writeErrors: errors, writeConcernError: concern, upserted } = reply as WriteReply
  const upsertedIds = upsertedOf(upserted)
  if (Array.isArray(errors) && errors.length > 0) throw new CommandWriteErrors(errors, concern, upsertedIds)
  if (concern !== undefined) throw new CommandConcernError(concern)
  return upsertedIds === NO_UPSERTS.upsertedIds ? NO_UPSERTS : { upsertedIds }
}

/** An update reply's `upserted` ([{ index, _id }]) as a bulkWrite's upsertedIds ({ [index]: _id }). */
function upsertedOf (upserted: WriteReply['upserted']): Record<number, unknown> {
  if (!Array.isArray(upserted) || upserted.length === 0) return NO_UPSERTS.upsertedIds
  const ids: Record<number, unknown> = {}
  for (const u of upserted) ids[Number(u.index)] = u._id
  return ids
}

/** The write concern was not met and no write was refused: applied, not as durably as asked (outcome unknown, as the driver's MongoWriteConcernError). */
export class CommandConcernError extends Error {
  override get name (): string { return 'CommandConcernError' }
  readonly code: number | undefined

  constructor (readonly writeConcernError: ConcernError) {
    super(`write concern not satisfied: ${writeConcernError.errmsg ?? 'unknown'}`)
    this.code = typeof writeConcernError.code === 'number' ? writeConcernError.code : undefined
  }
}

/** A write concern error comes as the driver's error, with the whole reply: writes refused beside it are per-write failures. */
function failed (err: unknown): never {
  if (err instanceof MongoWriteConcernError) {
    const reply = err.result as WriteReply | undefined
    const errors = reply?.writeErrors
    if (Array.isArray(errors) && errors.length > 0) throw new CommandWriteErrors(errors, reply?.writeConcernError, upsertedOf(reply?.upserted))
  }
  throw err
}
