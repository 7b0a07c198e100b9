import type { BulkWriteOptions, BulkWriteResult, Db, Document } from 'mongodb'
import { CollectionQueue } from './collection-queue.js'
import { BufferedCollection, type AnyDocument, type CollectionOptions } from './collection.js'
import { classify, isRetrySafe } from './classify.js'
import { split as splitMerged } from './coalesce.js'
import { ErrorCodes, WriteBufferError, WriteRejectedError, type WriteOutcome } from './errors.js'
import { resolveOptions, type ResolvedOptions, type WriteBufferOptions } from './options.js'
import { FlushTracker } from './flush-tracker.js'
import { ReadCache } from './read-cache.js'
import { batchChannel, publishBatch } from './telemetry.js'
import { validateCollectionName, type WriteOptions } from './validate.js'
import {
  INSERT, IN_FLIGHT, QUEUED, REPLACE_ONE, SETTLED, UPDATE_ONE, WAITING,
  type WriteOp, type WriteResult,
} from './write-op.js'

export interface WriteBufferStats {
  /** writes queued + in flight (+ waiting in retry backoff) */
  pending: number
  /** writes waiting for room (onFull: 'wait') */
  waiting: number
  /** bulkWrite commands in flight */
  inFlight: number
  /** bulkWrite commands sent */
  batches: number
  /** writes acknowledged by the server */
  flushedOps: number
  /** writes rejected after reaching the buffer (server refusals, failed batches, timeouts, aborts) */
  failedOps: number
  /** writes merged into an earlier write of the same target */
  coalescedOps: number
  /** batches sent again after a transient failure */
  retries: number
}


const EMPTY: Readonly<Record<string, never>> = Object.freeze({})

// One executor for every write's promise (it runs synchronously inside `new Promise`),
// instead of a fresh closure per write.
let settling: WriteOp | null = null
function takeResolvers (resolve: (r: WriteResult) => void, reject: (e: Error) => void): void {
  const op = settling as WriteOp
  op.resolve = resolve
  op.reject = reject
  settling = null
}

/**
 * Queues the writes of many callers and sends them as unordered bulkWrites.
 *
 * Scheduling lives in one place (`#pump`). A write entering an empty buffer arms the one
 * flush timer (`flushIntervalMs`: the longest it waits for company); reaching
 * `maxBatchSize`/`maxBatchBytes` in a collection, `flush()` or `close()` makes the buffer
 * "due". While due, every free in-flight slot takes the next batch at once, so under load
 * batches grow with the arrival rate instead of waiting for the timer, and `due` ends
 * only when the queues are empty.
 */
export class WriteBuffer {
  readonly db: Db
  /** the read cache, when `cache` options were given */
  readonly cache: ReadCache | undefined
  readonly #o: ResolvedOptions
  readonly #queues = new Map<string, CollectionQueue>()
  readonly #queueList: CollectionQueue[] = []
  readonly #handles = new Map<string, BufferedCollection>()
  readonly #bulkUnordered: BulkWriteOptions
  readonly #bulkOrdered: BulkWriteOptions
  #rr = 0
  #pending = 0
  #pendingBytes = 0
  #inFlight = 0
  #due = false
  #pumpScheduled = false
  #timer: NodeJS.Timeout | null = null
  #timerArmed = false
  #sweepTimer: NodeJS.Timeout | null = null
  #closed = false
  #closing: Promise<void> | null = null
  #waiters: WriteOp[] = []
  #waitHead = 0
  #liveWaiters = 0
  #mayRetryKnown: boolean | undefined
  readonly #finished = new WeakSet<WriteOp[]>()
  #backoffs = new Set<{ timer: NodeJS.Timeout, queue: CollectionQueue, ops: WriteOp[] }>()
  readonly #flushes = new FlushTracker()
  #stats = { batches: 0, flushedOps: 0, failedOps: 0, coalescedOps: 0, retries: 0 }
  readonly #pumpTask = (): void => {
    this.#pumpScheduled = false
    try {
      this.#pump()
    } catch (bug) {
      // never expected; but a throw here must neither crash the process from a microtask
      // nor stall the buffer: try again at the next interval
      this.#o.logger?.error({ err: bug }, 'write buffer: internal error while building a batch')
      this.#timerArmed = false
      this.#armTimer()
    }
  }

  constructor (db: Db, options?: WriteBufferOptions) {
    if (db === null || typeof db !== 'object' || typeof (db as Db).collection !== 'function') {
      throw new TypeError('WriteBuffer needs a mongodb Db as its first argument')
    }
    this.db = db
    this.#o = resolveOptions(options)
    const wc = this.#o.writeConcern
    this.#bulkUnordered = wc === undefined ? { ordered: false } : { ordered: false, writeConcern: wc }
    this.#bulkOrdered = wc === undefined ? { ordered: true } : { ordered: true, writeConcern: wc }
    this.cache = this.#o.cache === undefined ? undefined : new ReadCache(this.#o.cache)
    this.cache?.bindKick(() => { this.#makeDue() })
  }

  /** A driver-like handle whose writes go through the buffer. Same name → same handle. */
  collection<TSchema extends Document = AnyDocument> (name: string, options?: CollectionOptions): BufferedCollection<TSchema> {
    const existing = this.#handles.get(name)
    if (existing !== undefined) {
      if (options?.ordered !== undefined && options.ordered !== existing.ordered) {
        throw new TypeError(`collection ${JSON.stringify(name)} already has ordered: ${String(existing.ordered)}`)
      }
      return existing as unknown as BufferedCollection<TSchema>
    }
    validateCollectionName(name)
    const ordered = options?.ordered ?? false
    if (typeof ordered !== 'boolean') throw new TypeError(`ordered must be a boolean, got ${String(ordered)}`)
    const queue = new CollectionQueue(name, this.db.collection(name), ordered)
    this.#queues.set(name, queue)
    this.#queueList.push(queue)
    const handle = new BufferedCollection(queue.collection, ordered, (op, opts) => this.#submit(queue, op, opts), this.cache)
    this.#handles.set(name, handle as BufferedCollection)
    return handle as unknown as BufferedCollection<TSchema>
  }

  get closed (): boolean { return this.#closed }

  stats (): WriteBufferStats {
    return {
      pending: this.#pending,
      waiting: this.#liveWaiters,
      inFlight: this.#inFlight,
      ...this.#stats,
      coalescedOps: this.#queueList.reduce((n, q) => n + q.coalesced, 0),
    }
  }

  /** Resolves when every write submitted before the call has settled (acknowledged or rejected). */
  flush (): Promise<void> {
    const p = this.#flushes.flush()
    if (this.#flushes.unsettled > 0) this.#makeDue()
    return p
  }

  /**
   * Flushes everything, then rejects later writes with WRITE_BUFFER_CLOSED. After
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
    const timeoutMs = this.#o.closeTimeoutMs
    if (timeoutMs > 0) {
      let timer: NodeJS.Timeout | undefined
      const timedOut = await Promise.race([
        drained.then(() => false),
        new Promise<boolean>(resolve => { timer = setTimeout(resolve, timeoutMs, true) }),
      ])
      clearTimeout(timer)
      if (timedOut) this.#abandon()
    } else {
      await drained
    }
    if (this.#timer !== null) clearTimeout(this.#timer)
    this.#timer = null
    this.#timerArmed = false
    if (this.#sweepTimer !== null) clearTimeout(this.#sweepTimer)
    this.#sweepTimer = null
    this.cache?.clear()
  }

  /** close() timed out: tell every caller whose write was not sent. */
  #abandon (): void {
    for (let i = this.#waitHead; i < this.#waiters.length; i++) {
      const op = this.#waiters[i] as WriteOp
      if (op.state === WAITING) this.#reject(op, new WriteBufferError(ErrorCodes.CLOSED, 'write buffer closed before this write got room', 'not-sent', 0))
    }
    this.#waiters = []
    this.#waitHead = 0
    for (const b of this.#backoffs) {
      clearTimeout(b.timer)
      this.#backoffs.delete(b)
      b.queue.busy--
      for (const op of b.ops) {
        b.queue.release(op.target)
        const outcome: WriteOutcome = op.maybeApplied ? 'unknown' : 'not-sent'
        this.#rejectAll(op, new WriteBufferError(ErrorCodes.CLOSED, 'write buffer closed while this write waited to be retried', outcome, op.attempts))
      }
    }
    for (const q of this.#queueList) {
      for (const op of q.drain()) {
        const outcome: WriteOutcome = op.maybeApplied ? 'unknown' : 'not-sent'
        this.#rejectAll(op, new WriteBufferError(ErrorCodes.CLOSED, 'write buffer closed before this write was sent', outcome, op.attempts))
      }
    }
  }

  // ---- submit ------------------------------------------------------------------------

  #submit (queue: CollectionQueue, op: WriteOp, options: WriteOptions | undefined): Promise<WriteResult> {
    if (this.#closed) {
      return Promise.reject(new WriteBufferError(ErrorCodes.CLOSED, 'write buffer is closed', 'not-sent', 0))
    }
    settling = op
    const promise = new Promise<WriteResult>(takeResolvers)
    op.queue = queue
    op.epoch = this.#flushes.open()
    const timeoutMs = options?.timeoutMs ?? this.#o.writeTimeoutMs
    if (timeoutMs > 0) {
      op.deadline = Date.now() + timeoutMs
      this.#armSweep()
    }
    const signal = options?.signal
    if (signal !== undefined) {
      if (signal.aborted) {
        this.#flushes.settle(op.epoch)
        op.state = SETTLED
        this.#stats.failedOps++
        op.reject(abortError(0))
        return promise
      }
      op.signal = signal
      op.onAbort = () => { this.#abort(op) }
      signal.addEventListener('abort', op.onAbort, { once: true })
    }
    // while anyone waits for room, newcomers queue behind them: FIFO keeps same-target order
    if (this.#liveWaiters > 0 || this.#pending >= this.#o.maxPending ||
      (this.#pending > 0 && this.#pendingBytes + op.bytes > this.#o.maxPendingBytes)) {
      if (this.#o.onFullReject) {
        this.#flushes.settle(op.epoch)
        op.state = SETTLED
        this.#detach(op)
        this.#stats.failedOps++
        op.reject(new WriteBufferError(ErrorCodes.FULL, `write buffer is full (${this.#pending} pending, maxPending ${this.#o.maxPending})`, 'not-sent', 0))
        return promise
      }
      op.state = WAITING
      this.#liveWaiters++
      this.#waiters.push(op)
      this.cache?.noteWrite(queue.name, op) // a read after this call must see it, even while it waits
      return promise
    }
    this.#admit(op)
    this.cache?.noteWrite(queue.name, op)
    return promise
  }

  #admit (op: WriteOp): void {
    const queue = op.queue as CollectionQueue
    op.state = QUEUED
    this.#pending++
    this.#pendingBytes += op.bytes
    queue.push(op)
    if (queue.size >= this.#o.maxBatchSize || queue.bytes >= this.#o.maxBatchBytes) {
      this.#due = true
      this.#schedulePump()
    } else if (!this.#due && !this.#timerArmed) {
      this.#armTimer()
    }
  }

  // ---- scheduling --------------------------------------------------------------------

  #armTimer (): void {
    this.#timerArmed = true
    if (this.#timer === null) {
      this.#timer = setTimeout(() => {
        this.#timerArmed = false
        this.#makeDue()
      }, this.#o.flushIntervalMs)
    } else {
      this.#timer.refresh()
    }
    // Ref'd while armed: it is armed only when writes are queued, and a process that
    // awaits a queued write must not exit before the write is sent. An idle buffer has
    // no armed timer and keeps nothing alive.
  }

  #makeDue (): void {
    if (this.#timerArmed && this.#timer !== null) {
      // a cleared timer cannot be refresh()ed back to life: drop it, #armTimer makes a new one
      clearTimeout(this.#timer)
      this.#timer = null
      this.#timerArmed = false
    }
    this.#due = true
    this.#schedulePump()
  }

  #schedulePump (): void {
    if (this.#pumpScheduled) return
    this.#pumpScheduled = true
    queueMicrotask(this.#pumpTask)
  }

  #pump (): void {
    const o = this.#o
    const expired: WriteOp[] = []
    const now = Date.now()
    while (this.#due && this.#inFlight < o.maxInFlight) {
      let sent = false
      let queued = 0
      const n = this.#queueList.length
      for (let i = 0; i < n && this.#inFlight < o.maxInFlight; i++) {
        const queue = this.#queueList[(this.#rr + i) % n] as CollectionQueue
        if (queue.size === 0) continue
        const batch = queue.take(o.maxBatchSize, o.maxBatchBytes, o.coalesce, now, expired)
        queued += queue.size
        if (batch !== null) {
          this.#send(queue, batch)
          sent = true
        }
      }
      this.#rr++
      if (queued === 0 && !sent) {
        this.#due = false
        break
      }
      if (!sent) break // what is left waits behind in-flight writes of the same targets
    }
    for (const op of expired) this.#rejectAll(op, timeoutError(op))
  }

  // ---- dispatch ----------------------------------------------------------------------

  #send (queue: CollectionQueue, batch: WriteOp[]): void {
    this.#inFlight++
    queue.busy++
    this.#stats.batches++
    const models = new Array(batch.length)
    for (let i = 0; i < batch.length; i++) {
      const op = batch[i] as WriteOp
      op.state = IN_FLIGHT
      op.attempts++
      if (op.followers !== null) {
        for (const f of op.followers) { f.state = IN_FLIGHT; f.attempts = op.attempts }
      }
      models[i] = op.model
    }
    const started = batchChannel.hasSubscribers ? performance.now() : -1
    queue.collection.bulkWrite(models, queue.ordered ? this.#bulkOrdered : this.#bulkUnordered).then(
      result => {
        this.#onResult(queue, batch, result)
        if (started >= 0) publishBatch(queue.name, batch.length, started, undefined)
      },
      async err => {
        await this.#onError(queue, batch, err)
        if (started >= 0) publishBatch(queue.name, batch.length, started, err)
      },
    ).catch(bug => {
      // a bug in result handling must not strand the batch: settle whoever is left
      this.#failBatch(queue, batch, bug)
    })
  }

  #finish (queue: CollectionQueue, batch: WriteOp[]): void {
    if (this.#finished.has(batch)) return
    this.#finished.add(batch)
    queue.releaseBatch(batch)
    queue.busy--
    this.#inFlight--
    if (this.#pending > 0 || this.#due) { this.#due = true; this.#schedulePump() }
  }

  #onResult (queue: CollectionQueue, batch: WriteOp[], result: BulkWriteResult | undefined): void {
    const upserted = result?.upsertedIds
    let acked = 0
    for (let i = 0; i < batch.length; i++) {
      const op = batch[i] as WriteOp
      if (op.state === SETTLED) continue
      let value: WriteResult = EMPTY
      if (op.kind === INSERT) value = { insertedId: op.id }
      else if ((op.kind === UPDATE_ONE || op.kind === REPLACE_ONE) && upserted !== undefined) {
        const id = upserted[i]
        if (id !== undefined) value = { upsertedId: id }
      }
      acked += this.#resolveAll(op, value)
    }
    this.#stats.flushedOps += acked
    if (this.#o.logger !== undefined) this.#logFlush(queue, batch.length, acked)
    this.#finish(queue, batch)
  }

  async #onError (queue: CollectionQueue, batch: WriteOp[], err: unknown): Promise<void> {
    const writeErrors = (err as { writeErrors?: unknown[] }).writeErrors
    if (Array.isArray(writeErrors) && writeErrors.length > 0) {
      await this.#onWriteErrors(queue, batch, err as PartialFailure)
      return
    }
    const failure = classify(err, this.#driverMayRetry())
    const retry: WriteOp[] = []
    const now = Date.now()
    const o = this.#o
    let failed = 0
    for (const op of batch) {
      if (op.state === SETTLED) continue
      if (failure.outcome === 'unknown') op.maybeApplied = true
      const canRetry = failure.transient && op.attempts < o.maxAttempts &&
        (op.deadline === 0 || op.deadline > now + o.baseDelayMs) &&
        (failure.outcome === 'not-sent' || isRetrySafe(op))
      if (canRetry) {
        retry.push(op)
      } else {
        const outcome: WriteOutcome = op.maybeApplied ? 'unknown' : failure.outcome
        const msg = `bulkWrite to ${queue.name} failed (${describeError(failure.error)}); outcome ${outcome}`
        failed += this.#rejectAll(op, new WriteBufferError(ErrorCodes.BATCH_FAILED, msg, outcome, op.attempts, failure.error))
      }
    }
    if (o.logger !== undefined && failed > 0) {
      o.logger.error({ collection: queue.name, ops: batch.length, failed, retrying: retry.length, err: describeError(failure.error) },
        'write buffer: batch failed')
    }
    this.#finish(queue, batch)
    if (retry.length > 0) {
      // Hold the targets again while backing off (synchronously, before any pump runs):
      // a later write to the same document must not overtake the retried one.
      this.#stats.retries++
      for (const op of retry) queue.hold(op)
      this.#backoff(queue, retry)
    }
  }

  /** Whether the driver's own retryable writes may have re-sent a batch before we saw its error. */
  #driverMayRetry (): boolean {
    const client = (this.db as unknown as { client?: DriverClientView }).client
    if (client?.options?.retryWrites === false) return false
    const servers = client?.topology?.description?.servers
    let known: boolean | undefined
    if (servers !== undefined) {
      for (const server of servers.values()) {
        // an Unknown server (down right now) says nothing: keep what we last knew
        if (server.type === 'Standalone') known ??= false
        else if (server.type !== undefined && server.type !== 'Unknown') known = true
      }
    }
    if (known !== undefined) this.#mayRetryKnown = known
    return this.#mayRetryKnown ?? true // standalone servers have no retryable writes
  }

  #backoff (queue: CollectionQueue, ops: WriteOp[]): void {
    const o = this.#o
    const attempt = ops[0]?.attempts ?? 1
    const cap = Math.min(o.maxDelayMs, o.baseDelayMs * 2 ** (attempt - 1))
    const delay = cap / 2 + Math.random() * cap / 2 // jitter: no thundering herd on recovery
    queue.busy++
    const entry = {
      queue,
      ops,
      timer: setTimeout(() => {
        this.#backoffs.delete(entry)
        queue.busy--
        const live: WriteOp[] = []
        for (const op of ops) {
          queue.release(op.target)
          if (op.state === IN_FLIGHT) { op.state = QUEUED; live.push(op) }
        }
        queue.requeueFront(live)
        this.#makeDue()
      }, delay),
    }
    this.#backoffs.add(entry)
  }

  async #onWriteErrors (queue: CollectionQueue, batch: WriteOp[], err: PartialFailure): Promise<void> {
    const byIndex = new Map<number, ServerWriteError>()
    for (const we of err.writeErrors) byIndex.set(we.index, we)
    const upserted = err.result?.upsertedIds
    // Inserts retried after an unknown outcome: a duplicate key on the _id we generated
    // can only be our own earlier attempt, so it counts as written. Check it exists.
    let confirmed: Set<string> | null = null
    const recheck: unknown[] = []
    for (const [index, we] of byIndex) {
      const op = batch[index]
      if (op !== undefined && we.code === 11000 && op.kind === INSERT && op.maybeApplied) recheck.push(op.id)
    }
    if (recheck.length > 0) {
      try {
        const found = await queue.collection.find({ _id: { $in: recheck as never[] } }, { projection: { _id: 1 }, readPreference: 'primary' }).toArray()
        confirmed = new Set(found.map(d => String(d._id)))
      } catch {
        confirmed = null // cannot tell: those writes end 'unknown' (they are maybeApplied)
      }
    }
    // acknowledged by the server, but its write concern was not met: applied, not durable as asked
    const concernError = (err.result as { getWriteConcernError?: () => { errmsg?: string, code?: number } | undefined } | undefined)
      ?.getWriteConcernError?.()
    const split: WriteOp[] = []
    let acked = 0
    let failed = 0
    const firstError = queue.ordered ? Math.min(...byIndex.keys()) : Infinity
    const leftovers: WriteOp[] = []
    for (let i = 0; i < batch.length; i++) {
      const op = batch[i] as WriteOp
      if (op.state === SETTLED) continue
      const we = byIndex.get(i)
      if (i > firstError) { leftovers.push(op); continue } // ordered: never executed
      if (we === undefined && concernError !== undefined) {
        failed += this.#rejectAll(op, new WriteBufferError(ErrorCodes.BATCH_FAILED,
          `write concern not satisfied on ${queue.name}: ${concernError.errmsg ?? 'unknown'}`, 'unknown', op.attempts, concernError))
      } else if (we === undefined) {
        let value: WriteResult = EMPTY
        if (op.kind === INSERT) value = { insertedId: op.id }
        else if (upserted?.[i] !== undefined) value = { upsertedId: upserted[i] }
        acked += this.#resolveAll(op, value)
      } else if (confirmed?.has(String(op.id)) === true && op.ownId) {
        acked += this.#resolveAll(op, { insertedId: op.id })
      } else if (op.followers !== null && op.followers.length > 0) {
        // A merged update was refused (the statement applied nothing): one caller's part may
        // be to blame, so split it and retry each caller's own update, one after another.
        const followers = splitMerged(op)
        queue.coalesced -= followers.length
        split.push(op, ...followers)
      } else {
        const outcome: WriteOutcome = op.maybeApplied ? 'unknown' : 'rejected'
        failed += this.#rejectAll(op, new WriteRejectedError(we.code, we.errmsg ?? 'write failed', op.attempts, we.errInfo, outcome))
      }
    }
    this.#stats.flushedOps += acked
    for (const op of leftovers) { op.state = QUEUED; op.attempts-- }
    for (const op of split) op.state = QUEUED
    if (leftovers.length > 0) queue.requeueFront(leftovers)
    if (split.length > 0) queue.requeueFront(split)
    this.#finish(queue, batch)
    if (this.#o.logger !== undefined) {
      this.#o.logger.warn({ collection: queue.name, ops: batch.length, acked, rejected: failed, code: err.writeErrors[0]?.code },
        'write buffer: writes rejected by the server')
    }
  }

  /** Last resort for a bug in result handling: nobody may hang. */
  #failBatch (queue: CollectionQueue, batch: WriteOp[], bug: unknown): void {
    for (const op of batch) {
      if (op.state === IN_FLIGHT) this.#rejectAll(op, new WriteBufferError(ErrorCodes.BATCH_FAILED, `internal error: ${String(bug)}`, 'unknown', op.attempts, bug))
    }
    this.#finish(queue, batch)
  }

  #logFlush (queue: CollectionQueue, ops: number, acked: number): void {
    const logger = this.#o.logger
    if (logger === undefined || logger.isLevelEnabled?.('debug') === false) return
    logger.debug({ collection: queue.name, ops, acked, pending: this.#pending }, 'write buffer: flushed')
  }

  // ---- settle ------------------------------------------------------------------------

  #resolveAll (op: WriteOp, value: WriteResult): number {
    // callers first, bookkeeping after: a flush() waiting on these writes then resumes
    // after their own continuations
    let n = 1
    op.resolve(value)
    this.#settle(op, true)
    if (op.followers !== null) {
      // only the first of a coalesced sequence could have upserted
      for (const f of op.followers) { f.resolve(EMPTY); this.#settle(f, true); n++ }
    }
    return n
  }

  #rejectAll (op: WriteOp, err: Error): number {
    let n = 1
    this.#reject(op, err)
    if (op.followers !== null) for (const f of op.followers) { this.#reject(f, err); n++ }
    return n
  }

  #reject (op: WriteOp, err: Error): void {
    if (op.state === SETTLED) return
    op.reject(err)
    this.#stats.failedOps++
    if (op.state === WAITING) {
      op.state = SETTLED
      this.#liveWaiters--
      this.#detach(op)
      this.#flushes.settle(op.epoch)
      this.cache?.settleWrite((op.queue as CollectionQueue).name, op, false)
    } else {
      this.#settle(op, false)
    }
  }

  #settle (op: WriteOp, ok: boolean): void {
    op.state = SETTLED
    this.#pending--
    this.#pendingBytes -= op.bytes
    this.#detach(op)
    this.#flushes.settle(op.epoch)
    this.cache?.settleWrite((op.queue as CollectionQueue).name, op, ok)
    if (this.#waitHead < this.#waiters.length) this.#admitWaiters()
  }

  #detach (op: WriteOp): void {
    if (op.onAbort !== null) {
      op.signal?.removeEventListener('abort', op.onAbort)
      op.onAbort = null
      op.signal = null
    }
  }

  #admitWaiters (): void {
    const o = this.#o
    while (this.#waitHead < this.#waiters.length && this.#pending < o.maxPending) {
      const op = this.#waiters[this.#waitHead] as WriteOp
      if (op.state === WAITING && this.#pending > 0 && this.#pendingBytes + op.bytes > o.maxPendingBytes) break
      this.#waitHead++
      if (op.state === WAITING) {
        this.#liveWaiters--
        this.#admit(op)
      }
    }
    if (this.#waitHead === this.#waiters.length) {
      this.#waiters = []
      this.#waitHead = 0
    }
  }

  #abort (op: WriteOp): void {
    if (op.state === QUEUED && op.attempts === 0) {
      (op.queue as CollectionQueue).forget(op)
      this.#reject(op, abortError(op.attempts))
    } else if (op.state === WAITING) {
      this.#reject(op, abortError(0))
    }
    // in flight: it may already be applied; its caller learns the real result
  }

  // ---- deadlines ---------------------------------------------------------------------

  /**
   * One shared timer checks deadlines of writes still queued or waiting for room, so a
   * stalled server cannot hold them past their timeout. A write already on the wire waits
   * for the driver (set the client's socketTimeoutMS / timeoutMS to bound that).
   */
  #armSweep (): void {
    if (this.#sweepTimer !== null) return
    this.#sweepTimer = setTimeout(() => {
      this.#sweepTimer = null
      const now = Date.now()
      const expired: WriteOp[] = []
      for (const q of this.#queueList) q.expire(now, expired)
      for (let i = this.#waitHead; i < this.#waiters.length; i++) {
        const op = this.#waiters[i] as WriteOp
        if (op.state === WAITING && op.deadline !== 0 && op.deadline <= now) expired.push(op)
      }
      for (const op of expired) this.#rejectAll(op, timeoutError(op))
      if (this.#pending > 0 || this.#waitHead < this.#waiters.length) this.#armSweep()
    }, 50)
    this.#sweepTimer.unref()
  }
}

interface DriverClientView {
  options?: { retryWrites?: boolean }
  topology?: { description?: { servers?: Map<string, { type?: string }> } }
}
interface ServerWriteError { index: number, code: number, errmsg?: string, errInfo?: unknown }
interface PartialFailure { writeErrors: ServerWriteError[], result?: { upsertedIds?: Record<number, unknown> } }

function abortError (attempts: number): WriteBufferError {
  return new WriteBufferError(ErrorCodes.ABORTED, 'write aborted before it was sent', 'not-sent', attempts)
}

function timeoutError (op: WriteOp): WriteBufferError {
  const outcome: WriteOutcome = op.maybeApplied ? 'unknown' : 'not-sent'
  return new WriteBufferError(ErrorCodes.TIMEOUT, 'write timed out before it could be sent', outcome, op.attempts)
}

function describeError (err: unknown): string {
  const e = err as { name?: string, message?: string, code?: unknown }
  return `${e?.name ?? 'Error'}${e?.code !== undefined ? ` ${String(e.code)}` : ''}: ${e?.message ?? String(err)}`
}
