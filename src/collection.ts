import type { Collection, Document, Filter, FindOptions, InferIdType, OptionalUnlessRequiredId, UpdateFilter, WithoutId } from 'mongodb'
import type { ReadCache } from './cache/read-cache.js'
import {
  buildDelete, buildInsert, buildReplace, buildUpdate,
  type DeleteOptions, type ReplaceOptions, type UpdateOptions, type WriteOptions,
} from './write/build-op.js'
import type { DeleteResult, InsertResult, UpdateResult, WriteOp, WriteResult } from './write/write-op.js'

export interface CollectionOptions {
  /**
   * Send this collection's writes strictly in submission order (ordered bulkWrites, one at
   * a time). Use it when different filters may hit the same document. Slower.
   */
  ordered?: boolean
}

/** Default schema: any document, any `_id` type (the driver's default pins `_id` to ObjectId in filters). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export interface AnyDocument extends Document { _id?: any }

/**
 * The `_id` type of a schema, for `insertedId` and `upsertedId`: the driver's `InferIdType`
 * (the schema's `_id` type, `ObjectId` when it has none), except that a schema whose `_id` is
 * declared `any` (AnyDocument, the default) gives `any`: its documents may carry any `_id`.
 */
export type IdOf<TSchema> = TSchema extends { _id?: infer I } ? (0 extends 1 & I ? I : InferIdType<TSchema>) : InferIdType<TSchema>

/**
 * What `insertOne` takes: the driver's `OptionalUnlessRequiredId` (`_id` optional unless the
 * schema requires it), except that a schema whose `_id` is declared `any` (AnyDocument) takes any
 * `_id` (the driver's type would pin it to `ObjectId`).
 */
export type InsertDocument<TSchema> = TSchema extends { _id?: infer I } ? (0 extends 1 & I ? TSchema : OptionalUnlessRequiredId<TSchema>) : OptionalUnlessRequiredId<TSchema>

type Submit = (op: WriteOp, options: WriteOptions | undefined) => Promise<WriteResult>

/**
 * Driver-like handle: each write resolves when its own batch is acknowledged.
 * Per-op matched/modified counts do not exist inside one bulkWrite (the server reports
 * totals), so update results carry only `upsertedId` when this write upserted.
 * Bad input rejects at once (InvalidWriteError, a TypeError) and never joins a batch.
 */
export class BufferedCollection<TSchema extends Document = AnyDocument> {
  readonly #submit: Submit
  readonly #cache: ReadCache | undefined

  constructor (
    /** the driver collection, for reads and anything the buffer does not cover */
    readonly collection: Collection<TSchema>,
    readonly ordered: boolean,
    submit: Submit,
    cache: ReadCache | undefined
  ) {
    this.#submit = submit
    this.#cache = cache
  }

  get collectionName (): string { return this.collection.collectionName }

  insertOne (doc: InsertDocument<TSchema>, options?: WriteOptions): Promise<InsertResult<IdOf<TSchema>>> {
    let op: WriteOp
    try { op = buildInsert(doc, options) } catch (err) { return Promise.reject(err) }
    return this.#submit(op, options) as Promise<InsertResult<IdOf<TSchema>>>
  }

  updateOne (filter: Filter<TSchema>, update: UpdateFilter<TSchema> | Document[], options?: UpdateOptions): Promise<UpdateResult<IdOf<TSchema>>> {
    let op: WriteOp
    try { op = buildUpdate(false, filter, update, options) } catch (err) { return Promise.reject(err) }
    return this.#submit(op, options) as Promise<UpdateResult<IdOf<TSchema>>>
  }

  updateMany (filter: Filter<TSchema>, update: UpdateFilter<TSchema> | Document[], options?: UpdateOptions): Promise<UpdateResult<IdOf<TSchema>>> {
    let op: WriteOp
    try { op = buildUpdate(true, filter, update, options) } catch (err) { return Promise.reject(err) }
    return this.#submit(op, options) as Promise<UpdateResult<IdOf<TSchema>>>
  }

  replaceOne (filter: Filter<TSchema>, replacement: WithoutId<TSchema>, options?: ReplaceOptions): Promise<UpdateResult<IdOf<TSchema>>> {
    let op: WriteOp
    try { op = buildReplace(filter, replacement, options) } catch (err) { return Promise.reject(err) }
    return this.#submit(op, options) as Promise<UpdateResult<IdOf<TSchema>>>
  }

  deleteOne (filter: Filter<TSchema>, options?: DeleteOptions): Promise<DeleteResult> {
    let op: WriteOp
    try { op = buildDelete(false, filter, options) } catch (err) { return Promise.reject(err) }
    return this.#submit(op, options) as Promise<DeleteResult>
  }

  deleteMany (filter: Filter<TSchema>, options?: DeleteOptions): Promise<DeleteResult> {
    let op: WriteOp
    try { op = buildDelete(true, filter, options) } catch (err) { return Promise.reject(err) }
    return this.#submit(op, options) as Promise<DeleteResult>
  }

  /**
   * Cached when the buffer has `cache` options (see ReadCache for the consistency model),
   * a plain driver findOne otherwise.
   */
  findOne (filter: Filter<TSchema>, options?: FindOptions): Promise<TSchema | null> {
    if (this.#cache === undefined) return this.collection.findOne<TSchema>(filter, options ?? {})
    return this.#cache.findOne(this.collection as unknown as Collection, this.collection.collectionName, filter, options) as Promise<TSchema | null>
  }
}
