import type { AnyBulkWriteOperation, BulkWriteOptions, WriteConcernSettings } from 'mongodb'
import { INLINE_MAX_BYTES, WriteCommand, type SentAnswer } from '../mongo/write-command.js'
import type { ServerIdentity } from '../mongo/server-identity.js'
import type { DriverRetries } from '../mongo/topology.js'
import type { BatchSpan, Tracing } from '../tracing.js'
import type { WriteOp } from '../write/write-op.js'
import { BULK_WRITE, COMMAND, type Batch, type Route } from './batch.js'
import type { CollectionQueue } from './collection-queue.js'

/** The two ways a batch goes out (module functions: Tracing.send calls them with no closure). */
function bulkWrite (queue: CollectionQueue, models: AnyBulkWriteOperation[], options: BulkWriteOptions): Promise<SentAnswer> {
  return queue.collection.bulkWrite(models, options)
}
function writeCommand (queue: CollectionQueue, ops: readonly WriteOp[], commands: WriteCommand): Promise<SentAnswer> {
  return commands.send(queue.collection, ops, queue.ordered)
}

/**
 * How a batch travels: as one bulkWrite with the buffer's options (`maxTimeMS`, its write
 * concern, never functions as BSON code), or as the one write command that bulkWrite would be
 * (write-command.ts), with the batch's span active. Which one (routeOf):
 *
 * - The driver resends a failed write by itself only on a replica set or sharded cluster
 *   (DriverRetries#mayRetry), and that resend is exactly-once only where the server honours
 *   the retryable write's `txnNumber`: MongoDB (server-identity.ts). There batches go as
 *   bulkWrites and the driver's retry is relied on. A server that only *says* it is a replica
 *   set (docs/server-behaviours.md: a replica set in name only) gets every batch as a write command, so no attempt of the driver's own
 *   can land late behind a later acknowledged write; the buffer's fence and retry rules decide
 *   instead. Until the server is known to be MongoDB (buildInfo, asked in the background at the
 *   first batch), it is not.
 * - Where the driver never resends (a standalone server, retryWrites off) both mean the same;
 *   inserts go as the insert command, which costs less CPU, the rest as bulkWrites.
 * - A batch over INLINE_MAX_BYTES goes as a bulkWrite; where only commands are safe, batches
 *   are bounded below that (commandMaxBytes).
 */
export class Wire {
  readonly #unordered: BulkWriteOptions
  readonly #ordered: BulkWriteOptions

  constructor (
    options: { writeConcern: WriteConcernSettings | undefined, maxTimeMS: number },
    readonly driverRetries: DriverRetries,
    readonly identity: ServerIdentity,
    readonly tracing: Tracing,
    /** undefined: every batch is a bulkWrite (a Db that is not the driver's) */
    readonly commands: WriteCommand | undefined
  ) {
    const wc = options.writeConcern
    // functions in a document are never stored (as BSON code), whatever the client's serializeFunctions
    const base: BulkWriteOptions = { maxTimeMS: options.maxTimeMS, serializeFunctions: false }
    const common: BulkWriteOptions = wc === undefined ? base : { ...base, writeConcern: wc }
    this.#unordered = { ...common, ordered: false }
    this.#ordered = { ...common, ordered: true }
  }

  /**
   * Whether only write commands may go: the driver may resend on its own here and the server
   * is not known to be MongoDB. Asks who the server is the first time (in the background).
   */
  commandsOnly (): boolean {
    if (this.commands === undefined || !this.driverRetries.mayRetry()) return false
    const mongo = this.identity.knownMongoDB()
    if (mongo === undefined) this.identity.isMongoDB().catch(() => {}) // answers false on failure; asked again later
    return mongo !== true
  }

  /** How a batch of these writes travels (see the class comment). */
  routeOf (ops: readonly WriteOp[]): Route {
    if (this.commands === undefined) return BULK_WRITE
    // a lone write always fits one command body (a statement is under 16 MiB: build-op.ts);
    // batches of more are bounded to INLINE_MAX_BYTES here (commandMaxBytes)
    if (this.commandsOnly()) return ops.length === 1 || WriteCommand.covers(ops, false) ? COMMAND : BULK_WRITE
    return !this.driverRetries.mayRetry() && WriteCommand.covers(ops, true) ? COMMAND : BULK_WRITE
  }

  /** Whether an error of a batch sent by `route` may answer the driver's own second attempt. */
  mayHaveRetried (route: Route): boolean {
    return route === BULK_WRITE && this.driverRetries.mayHaveRetried()
  }

  /** Whether the driver may still be sending a batch of `route` on its own after it answered: a bulkWrite anywhere but on a standalone server. */
  mayResend (route: Route): boolean {
    return route === BULK_WRITE && !this.driverRetries.standalone()
  }

  /** The most bytes a batch may hold now: INLINE_MAX_BYTES where only commands may go (undefined: no bound of ours). */
  commandMaxBytes (): number | undefined {
    return this.commandsOnly() ? INLINE_MAX_BYTES : undefined
  }

  /** Sends the batch's models by its route (Batch#route); a driver that throws instead of rejecting rejects all the same. */
  send (batch: Batch<CollectionQueue>, models: AnyBulkWriteOperation[], span: BatchSpan | undefined): Promise<SentAnswer> {
    const queue = batch.queue
    try {
      const sent: Promise<SentAnswer> = batch.route === COMMAND
        ? this.tracing.send(span, writeCommand, queue, batch.ops, this.commands as WriteCommand)
        : this.tracing.send(span, bulkWrite, queue, models, this.#optionsOf(queue))
      // a thenable that is not a native promise (a wrapped Collection) is adopted
      return sent instanceof Promise ? sent : Promise.resolve(sent)
    } catch (err) {
      return Promise.reject(err) // must not strand the batch
    }
  }

  /** Part of a batch (`ops`, their `models`), by the batch's route, outside any span (isolation's halves). */
  sendPart (queue: CollectionQueue, route: Route, ops: readonly WriteOp[], models: AnyBulkWriteOperation[]): Promise<SentAnswer> {
    try {
      const sent = route === COMMAND ? writeCommand(queue, ops, this.commands as WriteCommand) : bulkWrite(queue, models, this.#optionsOf(queue))
      return sent instanceof Promise ? sent : Promise.resolve(sent)
    } catch (err) {
      return Promise.reject(err)
    }
  }

  #optionsOf (queue: CollectionQueue): BulkWriteOptions {
    return queue.ordered ? this.#ordered : this.#unordered
  }
}
