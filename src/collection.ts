import type { Collection, Document, Filter, FindOptions, InferIdType, OptionalUnlessRequiredId, PkFactory, UpdateFilter, WithoutId } from 'mongodb'
import type { CollectionQueue } from './buffer/collection-queue.js'
import type { ReadCache } from './cache/read-cache.js'
import { InvalidWriteError, describe } from './errors.js'
import {
  buildDelete, buildInsert, buildReplace, buildUpdate, customPkFactory,
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

/** A write's options with `detached: true`: the method returns undefined. */
export type Detached<O> = O & { detached: true }
/** A write's options without `detached: true`: the method returns a promise. */
export type NotDetached<O> = O & { detached?: false }

/**
 * How a handle hands its writes to its buffer (the facade): one port per buffer and the
 * handle's queue, instead of two closures per collection (10,000 collections, 10,000 handles).
 */
export interface WritePort {
  submit: (queue: CollectionQueue, op: WriteOp, options: WriteOptions | undefined) => Promise<WriteResult>
  submitDetached: (queue: CollectionQueue, op: WriteOp, options: WriteOptions) => void
}

/**
 * Driver-like handle: each write resolves when its own batch is acknowledged.
 * Per-op matched/modified counts do not exist inside one bulkWrite (the server reports
 * totals), so update results carry only `upsertedId` when this write upserted.
 * Bad input rejects at once (InvalidWriteError, a TypeError) and never joins a batch.
 * With `{ detached: true }` a write returns undefined instead of a promise: bad input then
 * throws, and a later failure goes to the buffer's `onWriteError`.
 */
export class BufferedCollection<TSchema extends Document = AnyDocument> {
  readonly #port: WritePort
  readonly #queue: CollectionQueue
  readonly #cache: ReadCache | undefined
  /** the client's own pkFactory, read once; undefined for the driver's default (ObjectIds) */
  readonly #pkFactory: PkFactory | undefined

  /** @internal a handle comes from `buffer.collection(name)` */
  constructor (
    /** the driver collection, for reads and anything the buffer does not cover */
    readonly collection: Collection<TSchema>,
    readonly ordered: boolean,
    /** (internal) the buffer's port and this collection's queue in it */
    port: WritePort,
    queue: CollectionQueue,
    cache: ReadCache | undefined,
    /** the Db's pkFactory (`db.options.pkFactory`: the client's unless the Db has its own) */
    pkFactory?: unknown
  ) {
    this.#port = port
    this.#queue = queue
    this.#cache = cache
    this.#pkFactory = customPkFactory(pkFactory)
  }

  get collectionName (): string { return this.collection.collectionName }

  insertOne (doc: InsertDocument<TSchema>, options: Detached<WriteOptions>): undefined
  insertOne (doc: InsertDocument<TSchema>, options?: NotDetached<WriteOptions>): Promise<InsertResult<IdOf<TSchema>>>
  insertOne (doc: InsertDocument<TSchema>, options?: WriteOptions): Promise<InsertResult<IdOf<TSchema>>> | undefined {
    let op: WriteOp
    try { op = buildInsert(doc, options, this.#pkFactory) } catch (err) { return this.#refuse(err, options) }
    return this.#send(op, options) as Promise<InsertResult<IdOf<TSchema>>> | undefined
  }

  updateOne (filter: Filter<TSchema>, update: UpdateFilter<TSchema> | Document[], options: Detached<UpdateOptions>): undefined
  updateOne (filter: Filter<TSchema>, update: UpdateFilter<TSchema> | Document[], options?: NotDetached<UpdateOptions>): Promise<UpdateResult<IdOf<TSchema>>>
  updateOne (filter: Filter<TSchema>, update: UpdateFilter<TSchema> | Document[], options?: UpdateOptions): Promise<UpdateResult<IdOf<TSchema>>> | undefined {
    let op: WriteOp
    try { op = buildUpdate(false, filter, update, options) } catch (err) { return this.#refuse(err, options) }
    return this.#send(op, options) as Promise<UpdateResult<IdOf<TSchema>>> | undefined
  }

  updateMany (filter: Filter<TSchema>, update: UpdateFilter<TSchema> | Document[], options: Detached<UpdateOptions>): undefined
  updateMany (filter: Filter<TSchema>, update: UpdateFilter<TSchema> | Document[], options?: NotDetached<UpdateOptions>): Promise<UpdateResult<IdOf<TSchema>>>
  updateMany (filter: Filter<TSchema>, update: UpdateFilter<TSchema> | Document[], options?: UpdateOptions): Promise<UpdateResult<IdOf<TSchema>>> | undefined {
    let op: WriteOp
    try { op = buildUpdate(true, filter, update, options) } catch (err) { return this.#refuse(err, options) }
    return this.#send(op, options) as Promise<UpdateResult<IdOf<TSchema>>> | undefined
  }

  replaceOne (filter: Filter<TSchema>, replacement: WithoutId<TSchema>, options: Detached<ReplaceOptions>): undefined
  replaceOne (filter: Filter<TSchema>, replacement: WithoutId<TSchema>, options?: NotDetached<ReplaceOptions>): Promise<UpdateResult<IdOf<TSchema>>>
  replaceOne (filter: Filter<TSchema>, replacement: WithoutId<TSchema>, options?: ReplaceOptions): Promise<UpdateResult<IdOf<TSchema>>> | undefined {
    let op: WriteOp
    try { op = buildReplace(filter, replacement, options) } catch (err) { return this.#refuse(err, options) }
    return this.#send(op, options) as Promise<UpdateResult<IdOf<TSchema>>> | undefined
  }

  deleteOne (filter: Filter<TSchema>, options: Detached<DeleteOptions>): undefined
  deleteOne (filter: Filter<TSchema>, options?: NotDetached<DeleteOptions>): Promise<DeleteResult>
  deleteOne (filter: Filter<TSchema>, options?: DeleteOptions): Promise<DeleteResult> | undefined {
    let op: WriteOp
    try { op = buildDelete(false, filter, options) } catch (err) { return this.#refuse(err, options) }
    return this.#send(op, options) as Promise<DeleteResult> | undefined
  }

  deleteMany (filter: Filter<TSchema>, options: Detached<DeleteOptions>): undefined
  deleteMany (filter: Filter<TSchema>, options?: NotDetached<DeleteOptions>): Promise<DeleteResult>
  deleteMany (filter: Filter<TSchema>, options?: DeleteOptions): Promise<DeleteResult> | undefined {
    let op: WriteOp
    try { op = buildDelete(true, filter, options) } catch (err) { return this.#refuse(err, options) }
    return this.#send(op, options) as Promise<DeleteResult> | undefined
  }

  // (each method builds its op inline: a closure per write would cost the hot path an allocation)

  /**
   * Bad input: an awaited write rejects, a detached one throws — always an InvalidWriteError
   * (a frozen document that cannot take its _id, a Proxy whose traps throw… included).
   */
  #refuse (err: unknown, options: WriteOptions | undefined): Promise<never> {
    const refusal = err instanceof InvalidWriteError ? err : new InvalidWriteError(`invalid write: ${err instanceof Error ? err.message : describe(err)}`)
    if (options?.detached === true) throw refusal
    return Promise.reject(refusal)
  }

  #send (op: WriteOp, options: WriteOptions | undefined): Promise<WriteResult> | undefined {
    if (options?.detached === true) {
      this.#port.submitDetached(this.#queue, op, options)
      return undefined
    }
    return this.#port.submit(this.#queue, op, options)
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
