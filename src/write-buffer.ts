import { within } from './clock.js'
import type { Db, Document } from 'mongodb'
import { Admission } from './buffer/admission.js'
import { abortError, Aborts } from './buffer/aborts.js'
import { Deadlines, timeoutError } from './buffer/deadlines.js'
import { DetachedFailures } from './buffer/detached-failures.js'
import { Dispatcher } from './buffer/dispatcher.js'
import { ServiceRate } from './buffer/service-rate.js'
import { closedError } from './buffer/outcomes.js'
import { FlushTracker } from './buffer/flush-tracker.js'
import { CollectionQueue } from './buffer/collection-queue.js'
import { Retries } from './buffer/retries.js'
import { Sender } from './buffer/sender.js'
import { WriteCommand } from './mongo/write-command.js'
import { Settler } from './buffer/settler.js'
import type { LatencySummary } from './buffer/latency.js'
import { Tracing } from './tracing.js'
import type { TracerProvider } from '@opentelemetry/api'
import { ReadCache } from './cache/read-cache.js'
import { BufferedCollection, type AnyDocument, type CollectionOptions, type WritePort } from './collection.js'
import { ErrorCodes, InvalidOptionError, WriteBufferError } from './errors.js'
import { DriverRetries } from './mongo/topology.js'
import { ServerIdentity } from './mongo/server-identity.js'
import { ServerLiveness } from './mongo/liveness.js'
import { resolveOptions, type ResolvedOptions, type WriteBufferOptions } from './options.js'
import { unacknowledged } from './mongo/write-concern.js'
import { validateCollectionName, type WriteOptions } from './write/build-op.js'
import { lingerEndFor, QUEUED, UPDATE_ONE, type WriteOp, type WriteResult } from './write/write-op.js'

export interface WriteBufferStats {
  /** pending writes: admitted, not settled (queued, in flight or backing off) */
  pending: number
  /** writes waiting for room (onFull: 'wait') */
  waiting: number
  /** bulkWrite commands in flight */
  inFlight: number
  /** how many bulkWrite commands may be in flight now: the adaptive limit (1 to `maxInFlight`), or `maxInFlight` when fixed */
  inFlightLimit: number
  /** bulkWrite commands sent */
  batches: number
  /** writes acknowledged by the server */
  acknowledgedOps: number
  /** @deprecated the same count as `acknowledgedOps` (its former name), kept until 1.0 */
  flushedOps: number
  /** writes rejected after reaching the buffer (server refusals, failed batches, timeouts, aborts) */
  failedOps: number
  /** writes coalesced into an earlier write of the same target */
  coalescedOps: number
  /** batches sent again after a transient failure */
  retries: number
  /** batches the server refused as a whole command, split to pin the writes to blame */
  isolatedBatches: number
  /** batches the server refused or interrupted as overloaded (462, 463, 473, SystemOverloadedError): each halves the in-flight limit, at most once per round */
  overloadedBatches: number
  /** while the server says it is overloaded, the writes per second the buffer sends at most (the overload pace); 0: no pace */
  overloadPace: number
  /** writes refused at the door (WRITE_BUFFER_SHED): at the rate the server serves the buffer, they would have passed their deadline queued */
  shedOps: number
  /**
   * the most writes the server takes in one command: as its hello announced it, or as it taught
   * by refusing a command for more (DocumentDB: 25,000 where hello says 100,000); undefined
   * before the server answered. Batches hold one fewer at most.
   */
  maxWriteBatchSize: number | undefined
  /** how long the oldest write of each batch waited in its queue (ms, last 1–2 minutes) */
  queueWaitMs: LatencySummary
  /** bulkWrite round trips (ms, last 1–2 minutes) */
  roundTripMs: LatencySummary
}

/**
 * Queues the writes of many callers and sends them as unordered bulkWrites. This class is
 * the facade: it wires the machinery in `buffer/` together (docs/ARCHITECTURE.md follows
 * one write through it) and owns only the buffer's open/closed life.
 */
export class WriteBuffer {
  readonly db: Db
  /** the read cache, when `cache` options were given */
  readonly cache: ReadCache | undefined
  readonly #options: ResolvedOptions
  readonly #handles = new Map<string, BufferedCollection>()
  readonly #flushes = new FlushTracker()
  readonly #admission: Admission
  readonly #settler: Settler
  readonly #aborts: Aborts
  readonly #deadlines: Deadlines
  readonly #retries: Retries
  readonly #liveness: ServerLiveness
  readonly #dispatcher: Dispatcher
  readonly #sender: Sender
  readonly #tracing: Tracing
  /** writes acknowledged per ms while backlogged: what a write with a deadline is judged by at the door */
  readonly #serviceRate = new ServiceRate()
  #shedOps = 0
  #closed = false
  #closing: Promise<void> | null = null
  /** what every handle submits through (with its queue): no closures per collection */
  readonly #port: WritePort = {
    submit: (queue, op, options) => this.#submit(queue, op, options),
    submitDetached: (queue, op, options) => { this.#submitDetached(queue, op, options) },
  }

  constructor (db: Db, options?: WriteBufferOptions) {
    const given: unknown = db
    if (given === null || typeof given !== 'object' || typeof (given as Db).collection !== 'function') {
      throw new InvalidOptionError('WriteBuffer needs a mongodb Db as its first argument')
    }
    this.db = db
    const o = this.#options = resolveOptions(options)
    if (o.writeConcern === undefined && unacknowledged(db.writeConcern?.w)) {
      throw new InvalidOptionError('the Db has writeConcern { w: 0 }: unacknowledged writes cannot be confirmed to their callers; ' +
        'give the buffer a writeConcern of w: 1 or more')
    }
    const cache = this.cache = o.cache === undefined ? undefined : new ReadCache(o.cache, o.logger, o.clock)
    this.#admission = new Admission(o, o.clock)
    const detachedFailures = new DetachedFailures(o.onWriteError, o.logger)
    const settler = this.#settler = new Settler(this.#admission, this.#flushes, this.cache, (op, err) => { detachedFailures.report(op, err) })
    this.#aborts = new Aborts(settler)
    const timedOut = (op: WriteOp): void => {
      // a waiter found expired may have been let into its queue meanwhile (an earlier rejection
      // of the same sweep freed room): it leaves the queue's count before it settles
      if (op.state === QUEUED) op.queue.forget(op)
      settler.reject(op, timeoutError(op))
    }
    this.#retries = new Retries(o, () => { this.#dispatcher.sendNow() }, timedOut, o.clock)
    const driverRetries = new DriverRetries(db)
    this.#liveness = new ServerLiveness(typeof db.command === 'function' ? timeoutMS => db.command({ ping: 1 }, { timeoutMS }) : undefined, undefined, undefined, o.clock)
    this.#tracing = new Tracing(db.databaseName, o.tracerProvider as TracerProvider | undefined)
    const sender = this.#sender = new Sender(o, settler, this.#retries, driverRetries, new ServerIdentity(db, o.clock), this.#liveness, this.#tracing,
      WriteCommand.for(db, o.writeConcern, o.maxTimeMS))
    if (o.cache?.bus !== undefined) sender.onAcknowledged = (name, ops, upsertedIdOf) => { cache?.published(name, ops, upsertedIdOf) }
    sender.onRoundTrip = (batch, ms, now) => {
      this.#dispatcher.roundTrip(ms, batch.size, now)
      // backlogged: more is left behind it than the server takes now (the Dispatcher's rule: a full batch, or writes the overload pace holds back), or writes wait for room
      this.#serviceRate.acknowledged(batch.size, this.#dispatcher.backlogged(batch.queue) || this.#admission.waiting > 0, now)
    }
    sender.onOverload = (now, sentAt, writes) => { this.#dispatcher.overloaded(now, sentAt, writes) }
    if (cache !== undefined) this.#retries.onFence = (batch, started) => { cache.fenced(batch.queue.name, batch.ops, started) }
    this.#dispatcher = new Dispatcher(
      { maxCount: o.maxBatchSize, maxBytes: o.maxBatchBytes, coalesce: o.coalesce, maxInFlight: o.maxInFlight, adaptiveInFlight: o.adaptiveInFlight, lingerMs: o.lingerMs, clock: o.clock },
      {
        send: batch => { sender.send(batch) },
        timedOut,
        internalError: err => { o.logger?.error({ err }, 'write buffer: internal error while building a batch') },
        flushAwaited: () => this.#flushes.awaited,
        serverMaxCount: () => driverRetries.maxWriteBatchSize(),
        commandMaxBytes: () => sender.commandMaxBytes(),
      })
    this.#deadlines = new Deadlines(o.writeTimeoutMs, {
      expire: (now, expired) => {
        for (const queue of this.#dispatcher.queues) queue.expire(now, expired)
        this.#admission.expire(now, expired)
      },
      timedOut,
      busy: () => this.#admission.pending > 0 || this.#admission.waiting > 0,
    }, o.clock)
    this.cache?.bindKick(() => { this.#dispatcher.flushAll() })
  }

  /** A driver-like handle whose writes go through the buffer. Same name → same handle. */
  collection<TSchema extends Document = AnyDocument> (name: string, options?: CollectionOptions): BufferedCollection<TSchema> {
    const existing = this.#handles.get(name)
    if (existing !== undefined) {
      if (options?.ordered !== undefined && options.ordered !== existing.ordered) {
        throw new InvalidOptionError(`collection ${JSON.stringify(name)} already has ordered: ${String(existing.ordered)}`)
      }
      return existing as unknown as BufferedCollection<TSchema>
    }
    validateCollectionName(name)
    const ordered = options?.ordered ?? false
    if (typeof ordered !== 'boolean') throw new InvalidOptionError(`ordered must be a boolean, got ${String(ordered)}`)
    const queue = new CollectionQueue(name, this.db.collection(name), ordered, this.#options.coalesce, this.#options.maxBatchBytes, this.#dispatcher, this.#options.clock)
    this.#dispatcher.add(queue)
    const handle = new BufferedCollection(queue.collection, ordered, this.#port, queue, this.cache, this.db.options?.pkFactory)
    this.#handles.set(name, handle)
    return handle as unknown as BufferedCollection<TSchema>
  }

  get closed (): boolean { return this.#closed }

  stats (): WriteBufferStats {
    let coalescedOps = 0
    for (const queue of this.#dispatcher.queues) coalescedOps += queue.coalesced
    return {
      pending: this.#admission.pending,
      waiting: this.#admission.waiting,
      inFlight: this.#dispatcher.inFlight,
      inFlightLimit: this.#dispatcher.inFlightLimit,
      batches: this.#dispatcher.sent,
      acknowledgedOps: this.#settler.acknowledged,
      // eslint-disable-next-line @typescript-eslint/no-deprecated -- the deprecated alias is still filled in
      flushedOps: this.#settler.acknowledged,
      failedOps: this.#settler.failed,
      coalescedOps,
      retries: this.#retries.scheduled,
      isolatedBatches: this.#sender.isolated,
      overloadedBatches: this.#sender.overloaded,
      overloadPace: Math.round(this.#dispatcher.pace * 1000),
      shedOps: this.#shedOps,
      maxWriteBatchSize: this.#sender.driverRetries.maxWriteBatchSize(),
      queueWaitMs: this.#sender.queueWait.summary(),
      roundTripMs: this.#sender.roundTrip.summary(),
    }
  }

  /** Resolves when every write submitted before the call has settled (acknowledged or rejected). */
  flush (): Promise<void> {
    const p = this.#flushes.flush()
    if (this.#flushes.unsettled > 0) this.#dispatcher.flushAll()
    return p
  }

  /**
   * Drains: sends everything, then rejects later writes with WRITE_BUFFER_CLOSED. After
   * `closeTimeoutMs` what is still queued (never sent) is rejected with outcome 'not-sent'
   * and close() resolves; a bulkWrite already on the wire settles its callers when the
   * driver answers. The MongoClient is never closed here: it is not ours.
   */
  close (): Promise<void> {
    if (this.#closing !== null) return this.#closing
    this.#closed = true
    this.#closing = this.#drain()
    return this.#closing
  }

  async #drain (): Promise<void> {
    const drained = this.flush()
    const timeoutMs = this.#options.closeTimeoutMs
    if (timeoutMs > 0) {
      if (!await within(this.#options.clock, drained, timeoutMs)) this.#abandon()
    } else {
      await drained
    }
    this.#dispatcher.stop()
    this.#deadlines.stop()
    this.#retries.stop()
    this.#liveness.stop()
    await this.cache?.close()
  }

  /** close() timed out: tell every caller whose write was not sent. */
  #abandon (): void {
    this.#sender.stopRetrying()
    for (const op of this.#admission.removeAllWaiting()) this.#settler.reject(op, closedError(op, 'before this write got room'))
    for (const batch of this.#retries.removeAll()) {
      for (const op of batch.ops) this.#settler.reject(op, closedError(op, 'while this write waited to be retried'))
    }
    for (const queue of this.#dispatcher.queues) {
      for (const op of queue.removeAll()) this.#settler.reject(op, closedError(op, 'before this write was sent'))
    }
  }

  /**
   * A detached write: validated already, queued like any other, no promise. Refusals that an
   * awaiting caller would get as a rejection at once (closed, full) are thrown here instead.
   */
  #submitDetached (queue: CollectionQueue, op: WriteOp, options: WriteOptions | undefined): void {
    if (this.#closed) throw closedBuffer()
    if (this.#admission.refuses(op, true)) throw this.#fullDetached()
    op.submitTo(queue, this.#tracing.capturing ? this.#tracing.activeSpan() : undefined)
    this.#settler.openDetached(op)
    this.#enter(queue, op, options)
  }

  #submit (queue: CollectionQueue, op: WriteOp, options: WriteOptions | undefined): Promise<WriteResult> {
    if (this.#closed) return Promise.reject(closedBuffer())
    op.submitTo(queue, this.#tracing.capturing ? this.#tracing.activeSpan() : undefined)
    const promise = this.#settler.open(op)
    this.#enter(queue, op, options)
    return promise
  }

  /**
   * Deadline, abort signal, room, read cache: the same for awaited and detached writes. Every
   * write runs it, so what few writes need (a linger, a refusal's message) is a method of its
   * own: this one stays small enough for the engine to inline whole into the caller's call.
   */
  #enter (queue: CollectionQueue, op: WriteOp, options: WriteOptions | undefined): void {
    const timeoutMs = this.#deadlines.start(op, options?.timeoutMs)
    const linger = options?.lingerMs
    // only an updateOne can take later writes of its target in: lingering is for those
    if (linger !== undefined && linger > 0 && op.kind === UPDATE_ONE) this.#linger(op, linger)
    const signal = options?.signal
    // a write with a deadline, while the buffer is backlogged: one that would expire queued is told now (service-rate.ts)
    if (timeoutMs > 0 && this.#serviceRate.measured && this.#shed(queue, op, timeoutMs)) return
    if (signal !== undefined && !this.#aborts.watch(op, signal)) {
      this.#settler.reject(op, abortError(0))
    } else if (!this.#admission.offer(op)) {
      this.#settler.reject(op, this.#full())
    } else {
      this.cache?.noteWrite(queue.name, op) // a read after this call must see it, even while it waits
    }
  }

  /** `op` lingers `ms` for later writes of its target, within half its time left. */
  #linger (op: WriteOp, ms: number): void {
    const now = this.#options.clock.now()
    op.linger(lingerEndFor(now, op.deadline, now + ms))
  }

  /** The refusal of a write that finds the buffer full (onFull: 'reject'). */
  #full (): WriteBufferError {
    return new WriteBufferError(ErrorCodes.FULL,
      `write buffer is full (${this.#admission.pending} pending, maxPending ${this.#options.maxPending})`, 'not-sent', 0)
  }

  /** The refusal of a detached write that finds the buffer full: it cannot wait for room. */
  #fullDetached (): WriteBufferError {
    return new WriteBufferError(ErrorCodes.FULL, `write buffer is full (${this.#admission.pending} pending, ` +
      `${this.#admission.waiting} waiting; detached writes wait only up to 2 × maxPending ${this.#options.maxPending})`, 'not-sent', 0)
  }

  /**
   * Refuses `op` (WRITE_BUFFER_SHED, not-sent) when the writes ahead of it — its collection's
   * queued writes and every write waiting for room — would outlast its `timeoutMs` at the rate
   * the server serves the buffer now. The whole buffer's rate is what its collection could get at best.
   */
  #shed (queue: CollectionQueue, op: WriteOp, timeoutMs: number): boolean {
    const ahead = queue.size + this.#admission.waiting
    if (!this.#serviceRate.refuses(timeoutMs, ahead, this.#options.clock.now())) return false
    this.#shedOps++
    this.#settler.reject(op, new WriteBufferError(ErrorCodes.SHED,
      `write shed: the ${ahead} writes ahead of it would outlast its ${timeoutMs} ms deadline at the rate the server serves the buffer now`, 'not-sent', 0))
    return true
  }
}

/** The refusal of a write submitted after close(). */
function closedBuffer (): WriteBufferError {
  return new WriteBufferError(ErrorCodes.CLOSED, 'write buffer is closed', 'not-sent', 0)
}
