import { Db, MongoWriteConcernError, WriteConcern, type AnyBulkWriteOperation, type BulkWriteResult, type Collection, type Document, type WriteConcernSettings } from 'mongodb'
import { INSERT, type WriteOp } from '../write/write-op.js'

/** All the Sender reads of an acknowledged batch: its upserts, which inserts have none. */
export type SentAnswer = Pick<BulkWriteResult, 'upsertedIds'>

const NO_UPSERTS: SentAnswer = Object.freeze({ upsertedIds: Object.freeze({}) })

/** a write error as the server sends it: a WriteRejectedError's cause (a bulkWrite's has the same fields) */
interface ServerWriteError { index: number, code: number, errmsg?: string, errInfo?: Document }
/** as it comes in the reply: numbers, or Int32 objects if the client reads replies with promoteValues: false */
interface RawWriteError { index: unknown, code: unknown, errmsg?: string, errInfo?: Document }
interface ConcernError { code?: number, errmsg?: string }
interface InsertReply { writeErrors?: RawWriteError[], writeConcernError?: ConcernError }

/**
 * Some inserts of the command were refused (`ok: 1` with `writeErrors`): what the Sender reads
 * of a partly failed bulkWrite (outcomes.ts, PartialFailure) — the server's write errors, which
 * name the refused writes by index, and the write concern error that came with them, if any.
 */
export class InsertWriteErrors extends Error {
  override get name (): string { return 'InsertWriteErrors' }
  /** the first refused write's code (a partly failed bulkWrite's error has it too) */
  readonly code: number
  readonly writeErrors: ServerWriteError[]
  readonly result: { upsertedIds: Record<number, unknown>, getWriteConcernError: () => ConcernError | undefined }

  constructor (errors: RawWriteError[], concern: ConcernError | undefined) {
    const first = errors[0] as RawWriteError
    super(`${errors.length} insert(s) refused, the first: ${first.errmsg ?? `code ${String(first.code)}`}`)
    this.code = Number(first.code)
    // as numbers, as the driver gives a bulkWrite's (whatever BSON options read the reply)
    this.writeErrors = errors.map(e => ({ ...e, index: Number(e.index), code: Number(e.code) }))
    this.result = { upsertedIds: {}, getWriteConcernError: () => concern }
  }
}

/**
 * The most estimated BSON bytes a batch sent as one insert command may hold. Its documents
 * travel inside the command body, which the server takes up to 16 MiB + 16 KiB (and the
 * driver's serializer up to 17 MiB), not as a document sequence that a bulkWrite splits. A
 * quarter of that (bson-size.ts's estimates are never short). Larger batches go as bulkWrites.
 */
export const INLINE_MAX_BYTES = 4 * 1024 * 1024

/**
 * Sends a batch of inserts as the one `insert` command an unordered (or ordered) bulkWrite
 * of them is on the wire, through `db.command`. The driver's bulk layer around that same
 * command (its operation list, a second size walk of every document, the inserted-id map,
 * the BulkWriteResult) cost 1.2-3.5 µs per write of app CPU at the 45-50 writes per batch a
 * route at 100 connections makes (bench CPU account, "driver alone" rows).
 *
 * Only where it changes nothing but that cost (the Sender asks DriverRetries#mayRetry, then
 * covers()): on a deployment where the driver never sends a write again on its own (a
 * standalone server, or retryWrites off), so a failure means what it meant for the bulkWrite
 * (on a replica set the driver's retryable write would resend a failed bulkWrite once,
 * exactly-once by its txnNumber; a command has no txnNumber); and for batches small enough for
 * one command body (INLINE_MAX_BYTES).
 *
 * The answer comes back in the shapes a bulkWrite's has, so the Sender and outcomes.ts read
 * one: acknowledged → no upserts; refused writes → InsertWriteErrors; the whole command
 * refused (`ok: 0`) → the driver's MongoServerError, as a bulkWrite's refusal is read; the
 * write concern not met with no write refused → the driver's MongoWriteConcernError
 * (outcome unknown, as a bulkWrite's). Network and client-side errors are the driver's own.
 */
export class InsertCommand {
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
  static for (db: Db, writeConcern: WriteConcernSettings | undefined, maxTimeMS: number): InsertCommand | undefined {
    return db instanceof Db ? new InsertCommand(db, writeConcern, maxTimeMS) : undefined
  }

  /** Whether a batch of these writes goes as one insert command: inserts only, within INLINE_MAX_BYTES. O(batch). */
  static covers (ops: readonly WriteOp[]): boolean {
    let bytes = 0
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i] as WriteOp
      if (op.kind !== INSERT) return false
      bytes += op.bytes
    }
    return bytes <= INLINE_MAX_BYTES
  }

  /** Sends the batch's insertOne models (in order: index i answers for models[i]). */
  send (collection: Collection, models: readonly AnyBulkWriteOperation[], ordered: boolean): Promise<SentAnswer> {
    const documents = new Array<Document>(models.length)
    for (let i = 0; i < models.length; i++) documents[i] = (models[i] as { insertOne: { document: Document } }).insertOne.document
    const { writeConcern, bson } = this.#optionsOf(collection)
    const command: Document = { insert: collection.collectionName, documents, ordered, maxTimeMS: this.#maxTimeMS }
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
        // collection's, as in its bulkWrite (checkKeys is off for inserts either way; functions
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
 * What a reply the driver resolved with means. A write concern error in it is read here too:
 * the driver throws one as MongoWriteConcernError (failed() below), but a driver that did not
 * (before throwIfWriteConcernError) would hand it over in the reply, and it must not read as
 * acknowledged.
 */
export function acknowledged (reply: Document): SentAnswer {
  const { writeErrors: errors, writeConcernError: concern } = reply as InsertReply
  if (Array.isArray(errors) && errors.length > 0) throw new InsertWriteErrors(errors, concern)
  if (concern !== undefined) throw new InsertConcernError(concern)
  return NO_UPSERTS
}

/** The write concern was not met and no write was refused: applied, not as durably as asked (outcome unknown, as the driver's MongoWriteConcernError). */
export class InsertConcernError extends Error {
  override get name (): string { return 'InsertConcernError' }
  readonly code: number | undefined

  constructor (readonly writeConcernError: ConcernError) {
    super(`write concern not satisfied: ${writeConcernError.errmsg ?? 'unknown'}`)
    this.code = typeof writeConcernError.code === 'number' ? writeConcernError.code : undefined
  }
}

/** A write concern error comes as the driver's error, with the whole reply: writes refused beside it are per-write failures. */
function failed (err: unknown): never {
  if (err instanceof MongoWriteConcernError) {
    const reply = err.result as InsertReply | undefined
    const errors = reply?.writeErrors
    if (Array.isArray(errors) && errors.length > 0) throw new InsertWriteErrors(errors, reply?.writeConcernError)
  }
  throw err
}
