import { Db, MongoWriteConcernError, WriteConcern, type AnyBulkWriteOperation, type BulkWriteResult, type Collection, type Document, type WriteConcernSettings } from 'mongodb'
import { INSERT, type WriteOp } from '../write/write-op.js'

/** All the Sender reads of an acknowledged batch: its upserts, which inserts have none. */
export type SentAnswer = Pick<BulkWriteResult, 'upsertedIds'>

const NO_UPSERTS: SentAnswer = Object.freeze({ upsertedIds: Object.freeze({}) })

/** a write error as the server sends it: a WriteRejectedError's cause (a bulkWrite's has the same fields) */
interface ServerWriteError { index: number, code: number, errmsg?: string, errInfo?: Document }
interface ConcernError { code?: number, errmsg?: string }
interface InsertReply { writeErrors?: ServerWriteError[], writeConcernError?: ConcernError }

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

  constructor (errors: ServerWriteError[], concern: ConcernError | undefined) {
    const first = errors[0] as ServerWriteError
    super(`${errors.length} insert(s) refused, the first: ${first.errmsg ?? `code ${first.code}`}`)
    this.code = first.code
    this.writeErrors = errors
    this.result = { upsertedIds: {}, getWriteConcernError: () => concern }
  }
}

/**
 * Sends a batch of inserts as the one `insert` command an unordered (or ordered) bulkWrite
 * of them is on the wire, through `db.command`. The driver's bulk layer around that same
 * command (its operation list, a second size walk of every document, the inserted-id map,
 * the BulkWriteResult) cost 1.2-3.5 µs per write of app CPU at the 45-50 writes per batch a
 * route at 100 connections makes (bench CPU account, "driver alone" rows).
 *
 * Only where the driver's own retryable writes add nothing (covers()): every write of the
 * batch an insert, and each with the _id the buffer generated (an attempt sent again after an
 * unknown outcome can only collide with itself, which outcomes.ts confirms) or the
 * deployment a standalone server (its driver never re-sends). `db.command` never retries on
 * its own, so nothing is sent twice behind the buffer's back either.
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

  /** Whether a batch of these writes goes as an insert command (see the class). O(batch). */
  static covers (ops: readonly WriteOp[], standalone: boolean): boolean {
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i] as WriteOp
      if (op.kind !== INSERT || !(op.generatedId || standalone)) return false
    }
    return true
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
        // db.command inherits no BSON options: the collection's, as a bulkWrite serializes with
        // them; functions in a document are never stored (as BSON code), as in every bulkWrite
        bson: { ...collection.bsonOptions, serializeFunctions: false },
      }
      this.#options.set(collection, options)
    }
    return options
  }
}

function acknowledged (reply: Document): SentAnswer {
  const errors = (reply as InsertReply).writeErrors
  if (Array.isArray(errors) && errors.length > 0) throw new InsertWriteErrors(errors, undefined)
  return NO_UPSERTS
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
