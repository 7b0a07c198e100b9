import type { AnyBulkWriteOperation, BulkWriteOptions, BulkWriteResult, WriteConcernSettings } from 'mongodb'
import { InsertCommand, type SentAnswer } from '../mongo/insert-command.js'
import type { DriverRetries } from '../mongo/topology.js'
import type { BatchSpan, Tracing } from '../tracing.js'
import type { Batch, BatchQueue } from './batch.js'

/** The two ways a batch goes out (module functions: Tracing.send calls them with no closure). */
function bulkWrite (queue: BatchQueue, models: AnyBulkWriteOperation[], options: BulkWriteOptions): Promise<BulkWriteResult> {
  return queue.collection.bulkWrite(models, options)
}
function insertCommand (queue: BatchQueue, models: AnyBulkWriteOperation[], inserts: InsertCommand): Promise<SentAnswer> {
  return inserts.send(queue.collection, models, queue.ordered)
}

/**
 * How a batch travels: as one bulkWrite with the buffer's options (`maxTimeMS`, its write
 * concern, never functions as BSON code), or — a batch of inserts, where the driver never
 * resends a write on its own (DriverRetries#mayRetry) and insert-command.ts takes it — as the
 * one insert command that bulkWrite would be. Either way with the batch's span active.
 */
export class Wire {
  readonly #unordered: BulkWriteOptions
  readonly #ordered: BulkWriteOptions

  constructor (
    options: { writeConcern: WriteConcernSettings | undefined, maxTimeMS: number },
    readonly driverRetries: DriverRetries,
    readonly tracing: Tracing,
    /** undefined: every batch is a bulkWrite (a Db that is not the driver's) */
    readonly inserts: InsertCommand | undefined
  ) {
    const wc = options.writeConcern
    // functions in a document are never stored (as BSON code), whatever the client's serializeFunctions
    const base: BulkWriteOptions = { maxTimeMS: options.maxTimeMS, serializeFunctions: false }
    const common: BulkWriteOptions = wc === undefined ? base : { ...base, writeConcern: wc }
    this.#unordered = { ...common, ordered: false }
    this.#ordered = { ...common, ordered: true }
  }

  /** Sends the batch's models (Batch#send); a driver that throws instead of rejecting rejects all the same. */
  send (batch: Batch, models: AnyBulkWriteOperation[], span: BatchSpan | undefined): Promise<SentAnswer> {
    const queue = batch.queue
    const inserts = this.inserts
    try {
      const sent: Promise<SentAnswer> = inserts !== undefined && !this.driverRetries.mayRetry() && InsertCommand.covers(batch.ops)
        ? this.tracing.send(span, insertCommand, queue, models, inserts)
        : this.tracing.send(span, bulkWrite, queue, models, this.#optionsOf(queue))
      // a thenable that is not a native promise (a wrapped Collection) is adopted
      return sent instanceof Promise ? sent : Promise.resolve(sent)
    } catch (err) {
      return Promise.reject(err) // must not strand the batch
    }
  }

  /** A plain bulkWrite of these models to the queue's collection, outside any span (isolation's halves). */
  bulkWrite (queue: BatchQueue, models: AnyBulkWriteOperation[]): Promise<BulkWriteResult> {
    return bulkWrite(queue, models, this.#optionsOf(queue))
  }

  #optionsOf (queue: BatchQueue): BulkWriteOptions {
    return queue.ordered ? this.#ordered : this.#unordered
  }
}
