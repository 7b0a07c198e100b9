import type { Clock } from '../clock.js'
import type { AnyBulkWriteOperation, WriteConcernSettings } from 'mongodb'
import { ErrorCodes, WriteBufferError } from '../errors.js'
import { describeError, readFailure, type DriverFailure, type Failure, type PartialFailure } from '../mongo/driver-errors.js'
import type { SentAnswer, WriteCommand } from '../mongo/write-command.js'
import type { ServerIdentity } from '../mongo/server-identity.js'
import { foundUnsendable, NOT_SERIALIZER, SERIALIZER_IF_FOUND, serializerFailure } from '../write/send-check.js'
import type { DriverRetries } from '../mongo/topology.js'
import type { Logger } from '../options.js'
import { batchChannel, publishBatch } from '../telemetry.js'
import type { BatchSpan, Tracing } from '../tracing.js'
import { IN_FLIGHT, SETTLED, type TraceLink, type WriteOp, type WriteResult } from '../write/write-op.js'
import { indexesProven, isolate, IsolationOutcome, partlyRefused, splittable, unprovenFailure } from './isolate.js'
import { Batch, type Route } from './batch.js'
import type { CollectionQueue } from './collection-queue.js'
import { Wire } from './wire.js'
import { Latency } from './latency.js'
import { afterBatchFailure, afterUnsendable, confirmInserted, batchFailed, closedError, noneGoesAgain, PartialFailureReader, type RetryPolicy } from './outcomes.js'
import { FENCE_MARGIN_MS, waitOut, type Fence, type Retries } from './retries.js'
import type { ServerLiveness } from '../mongo/liveness.js'
import type { Settler } from './settler.js'

export interface SenderOptions extends RetryPolicy {
  writeConcern: WriteConcernSettings | undefined
  /** server-side time limit of every bulkWrite: after it, an attempt can no longer apply */
  maxTimeMS: number
  logger: Logger | undefined
  clock: Clock
}

const NO_LINKS: readonly TraceLink[] = [] // a batch none of whose writes captured a span links to nothing

/**
 * Sends one batch as one bulkWrite (or as the one insert command it would be: wire.ts) and routes
 * the answer: every write is settled (Settler), put back in its queue, or handed to Retries —
 * exactly once, whatever the driver answers — then the batch goes back to its queue.
 */
export class Sender {
  /** how a batch travels */
  readonly #wire: Wire
  /** how long a batch's oldest write waited in its queue */
  readonly queueWait: Latency
  /** bulkWrite sent → answered */
  readonly roundTrip: Latency
  /** told the writes the server acknowledged, once per batch, before their callers are resolved (the cache bus publishes them); `upsertedIdOf(i)`: the i-th's upserted _id */
  onAcknowledged: ((name: string, ops: readonly WriteOp[], upsertedIdOf: (index: number) => unknown) => void) | undefined
  /** batches refused as a whole command and split to isolate the writes to blame (stats) */
  isolated = 0
  /** batches the server refused or interrupted because it is overloaded (stats) */
  overloaded = 0
  /** told each acknowledged batch's round trip (ms, `now`: clock time), before its writes settle (the in-flight limit, the service rate) */
  onRoundTrip: ((batch: Batch<CollectionQueue>, ms: number, now: number) => void) | undefined
  /** told each batch the server answered it is overloaded (462, 463, 473, SystemOverloadedError), before the batch returns */
  onOverload: ((now: number, sentAt: number, writes: number) => void) | undefined
  /** close() gave up waiting: a batch still on the wire that fails is not sent again */
  #final = false

  constructor (
    readonly options: SenderOptions,
    readonly settler: Settler,
    readonly retries: Retries,
    readonly driverRetries: DriverRetries,
    readonly identity: ServerIdentity,
    readonly liveness: ServerLiveness,
    readonly tracing: Tracing,
    /** batches that go as write commands (wire.ts, write-command.ts); undefined: every batch is a bulkWrite */
    commands: WriteCommand | undefined
  ) {
    this.#wire = new Wire(options, driverRetries, identity, tracing, commands)
    this.queueWait = new Latency(options.clock)
    this.roundTrip = new Latency(options.clock)
  }

  /** The most bytes a batch may hold now, where only write commands may go (wire.ts); undefined: no bound of the Wire's. */
  commandMaxBytes (): number | undefined { return this.#wire.commandMaxBytes() }

  /** From now on nothing is sent again: a write that would be retried is rejected WRITE_BUFFER_CLOSED. */
  stopRetrying (): void { this.#final = true }

  send (batch: Batch<CollectionQueue>): void {
    const queue = batch.queue
    let models: AnyBulkWriteOperation[]
    try {
      models = batch.send()
      batch.route = this.#wire.routeOf(batch.ops)
    } catch (bug) {
      this.#notSent(batch, bug)
      return
    }
    const started = this.options.clock.now()
    this.queueWait.record(started - batch.queuedAt, started)
    const span = this.tracing.start(queue.name, batch.size, batch.linked ? batch.links() : NO_LINKS, batch.retryOf, batch.attempt)
    // the answer is handled a microtask after the driver's promise settles, either way; one
    // `then` with two small closures per batch (an async function awaiting it cost twice the memory)
    this.#wire.send(batch, models, span).then(
      (result: SentAnswer | undefined) => { this.#answer(batch, started, span, false, result) },
      (err: unknown) => { this.#answer(batch, started, span, true, err) }
    )
  }

  /** Routes the driver's answer (`failed`: it rejected with `answer`); never throws. */
  #answer (batch: Batch<CollectionQueue>, started: number, span: BatchSpan | undefined, failed: boolean, answer: unknown): void {
    try {
      // the round trip ends when the driver answers (not after a follow-up read of ours)
      const now = this.#answered(batch, started, span, failed ? answer : undefined)
      if (!failed) {
        this.onRoundTrip?.(batch, now - started, now)
        this.#acknowledged(batch, answer as SentAnswer | undefined)
        return
      }
      // what the driver threw, read once (driver-errors.ts#DriverFailure): everything after reads this view
      const thrown = readFailure(answer)
      this.#overloaded(thrown, now, started, batch.size)
      this.#failed(batch, thrown, span?.context).catch((bug: unknown) => { this.#internalError(batch, bug) })
    } catch (bug) {
      this.#internalError(batch, bug)
    }
  }

  /** A bug before anything went on the wire must not strand the batch (its writes, its slot): they fail, not sent by this attempt. */
  #notSent (batch: Batch<CollectionQueue>, bug: unknown): void {
    const failed = (op: WriteOp): Error => new WriteBufferError(ErrorCodes.BATCH_FAILED, `internal error before sending: ${String(bug)}`, op.maybeApplied ? 'unknown' : 'not-sent', op.attempts, bug)
    for (const op of batch.ops) if (op.state !== SETTLED) this.settler.reject(op, failed(op))
    this.#return(batch)
  }

  /** A bug in result handling must not strand the batch: settle whoever is left. */
  #internalError (batch: Batch<CollectionQueue>, bug: unknown): void {
    for (const op of batch.ops) {
      // a write settled before the bug may have writes coalesced into it still unsettled: reject reaches them too
      if (op.state === IN_FLIGHT || op.coalesced?.some(c => c.state === IN_FLIGHT) === true) {
        this.settler.reject(op, new WriteBufferError(ErrorCodes.BATCH_FAILED, `internal error: ${String(bug)}`, 'unknown', op.attempts, bug))
      }
    }
    this.#return(batch)
  }

  /** Once per attempt, when the driver answered: its round trip, span and telemetry. Returns when (clock time). */
  #answered (batch: Batch<CollectionQueue>, started: number, span: BatchSpan | undefined, err: unknown): number {
    const now = this.options.clock.now()
    this.roundTrip.record(now - started, now)
    this.tracing.end(span, err)
    if (batchChannel.hasSubscribers) publishBatch(batch.queue.name, batch.size, now - started, err)
    return now
  }

  /** The server said it is overloaded (however the driver shaped its answer): counted, and told before the batch returns. */
  #overloaded (failed: DriverFailure, now: number, sentAt: number, writes: number): void {
    if (!failed.overload) return
    this.overloaded++
    this.onOverload?.(now, sentAt, writes)
  }

  #return (batch: Batch<CollectionQueue>): void {
    if (batch.finish()) batch.queue.returned(batch) // the queue frees its targets and tells the Dispatcher
  }

  #acknowledged (batch: Batch<CollectionQueue>, result: SentAnswer | undefined): void {
    const upserted = result?.upsertedIds
    const ops = batch.ops
    this.onAcknowledged?.(batch.queue.name, ops, i => upserted?.[i])
    const acked = this.settler.resolveAll(ops, upserted)
    const logger = this.options.logger
    if (logger !== undefined && logger.isLevelEnabled?.('debug') !== false) {
      logger.debug({ collection: batch.queue.name, ops: ops.length, acked }, 'write buffer: flushed')
    }
    this.#return(batch)
  }

  async #failed (batch: Batch<CollectionQueue>, failed: DriverFailure, span: TraceLink | undefined): Promise<void> {
    if (failed.kind === 'refusal') {
      if (!this.#tooMany(batch, failed)) await this.#refused(batch, failed, span)
    } else if (failed.partial !== undefined) {
      await this.#partlyFailed(batch, failed, failed.partial)
    } else if (this.#unsendable(batch, failed.error)) {
      // told, or sent again
    } else if (failed.closedConnection && batch.ops.some(op => op.state !== SETTLED && op.closedBefore)) {
      await this.#isolateClosed(batch, failed, span)
    } else {
      this.#wholeFailed(batch, failed, this.#classifyWhole(failed, batch.route), span)
    }
  }

  /**
   * The connection closed under this batch again, after its resend waited out a fence that
   * needed the server to answer a ping (Sender#wholeFailed): the server is up and drops the
   * connection on something this batch carries (FerretDB 1.24 on a NaN: docs/server-behaviours.md: a poison can close the connection). Resent
   * whole, it would hit the same wall until its attempts run out, and every mate would end
   * `unknown`. So it is isolated like a refused batch whose outcome is unknown: once this
   * attempt can no longer apply (the same fence), the retry-safe writes go again in halves, a
   * half whose connection closes is split further, until the culprit is alone (`unknown`); the
   * writes that are not retry-safe are told `unknown` at once. Afterwards every target stays
   * fenced from the last close, as after any ambiguous failure.
   */
  async #isolateClosed (batch: Batch<CollectionQueue>, failed: DriverFailure, span: TraceLink | undefined): Promise<void> {
    // this attempt may have applied any of them (the connection closed under it)
    for (const op of batch.ops) if (op.state !== SETTLED) op.mayHaveApplied()
    // the wait is in flight, out of Deadlines' and Retries' sight: a write whose deadline passes
    // meanwhile is told so then (WRITE_BUFFER_TIMEOUT, unknown), as one waiting for its retry is
    this.retries.watchDeadlines(batch)
    try {
      await waitOut(this.options.clock, this.options.clock.now(), this.#windowMs, this.liveness)
    } finally {
      this.retries.unwatch(batch)
    }
    await this.#refused(batch, failed, span, unprovenFailure(failed), { at: 0 })
  }

  /**
   * The server refused the command for holding more writes than it takes (DriverFailure#writeBatchBound: it
   * read no statement, so none was applied; DocumentDB's hello overstates its bound). The bound
   * is kept for the rest of the client's life (stats: maxWriteBatchSize) and the writes go back to
   * the head of their queue, this attempt uncounted, to go in batches the server takes — not
   * split as a refusal of unknown outcome, which would tell a duplicate key among them `unknown`.
   */
  #tooMany (batch: Batch<CollectionQueue>, refusal: DriverFailure): boolean {
    const bound = refusal.writeBatchBound
    const live = batch.ops.filter(op => op.state !== SETTLED)
    if (bound === undefined || live.length <= bound || this.#final) return false
    this.driverRetries.learnMaxWriteBatchSize(bound)
    for (const op of live) op.sendAgain(false)
    this.#requeue(batch.queue, live)
    this.#return(batch)
    this.options.logger?.warn({ collection: batch.queue.name, ops: live.length, maxWriteBatchSize: bound },
      'write buffer: the server takes fewer writes per command than its hello said; batches keep to its bound from now on')
    return true
  }

  /** What a refusal of a whole command means; asks the server who it is (once) to know. */
  async #classifyRefusal (refusal: DriverFailure, route: Route): Promise<Failure> {
    const isMongoDB = await this.identity.isMongoDB()
    return refusal.classify(this.#wire.mayHaveRetried(route), true, isMongoDB)
  }

  /** What a failure of the whole batch means (no need to know the server: only a refusal's meaning depends on it, #classifyRefusal). */
  #classifyWhole (failed: DriverFailure, route: Route): Failure {
    return failed.classify(this.#wire.mayHaveRetried(route), this.driverRetries.everConnected())
  }

  /**
   * The server refused the whole command. Transient (the server in trouble): decided as a
   * whole failure (resent after a backoff if nothing was applied or the write is retry-safe).
   * Otherwise one write may be to blame: isolate it (isolate.ts), so its batch-mates are applied.
   */
  async #refused (batch: Batch<CollectionQueue>, refusal: DriverFailure, span: TraceLink | undefined, known?: Failure, closed?: { at: number }): Promise<void> {
    const failure = known ?? await this.#classifyRefusal(refusal, batch.route)
    const live = batch.ops.filter(op => op.state !== SETTLED)
    if (this.#final || (closed === undefined && !splittable(live, refusal, failure))) {
      this.#wholeFailed(batch, refusal, failure, span)
      return
    }
    const queue = batch.queue
    const out = new IsolationOutcome()
    this.isolated++
    const route = batch.route
    const send = (ops: readonly WriteOp[], models: AnyBulkWriteOperation[]): Promise<SentAnswer> => this.#wire.sendPart(queue, route, ops, models)
    const confirm = (ids: unknown[]): Promise<Set<string> | null> => confirmInserted(queue.collection, ids)
    const classify = (r: DriverFailure): Promise<Failure> => this.#classifyRefusal(r, route)
    await isolate(live, refusal, failure, { send, classify, confirm, stopped: () => this.#final, ordered: queue.ordered, collection: queue.name, reportsStatements: await this.identity.reportsStatements(), closed, clock: this.options.clock }, out)
    // a part whose connection closed may still be running on the server: its targets are fenced
    // from the last close, the writes to send again included (they wait out the fence as a
    // retry does). Held in the same turn as the batch is returned, so no pump runs in between.
    const fence = this.#closedFence(closed)
    const later = fence === undefined ? [] : out.toSendAgain.filter(op => op.state === IN_FLIGHT)
    this.#apply(queue, out, later.length === 0 ? out.toSendAgain : out.toSendAgain.filter(op => op.state !== IN_FLIGHT))
    this.#failedParts(batch, out.failedParts.map(p => ({ cause: p.failed, failure: this.#classifyWhole(p.failed, route), ops: p.ops })), span)
    if (fence === undefined) return
    if (later.length > 0) this.#retryAfter(queue, later, fence)
    // the writes failed otherwise (failedOps) are fenced by #wholeFailed, by their own failure
    const failed = new Set(out.failedOps)
    const settled = live.filter(op => op.state === SETTLED && !failed.has(op))
    if (settled.length > 0) this.retries.fence(new Batch(queue, settled, false), fence)
  }

  /** How long after an ambiguous attempt it may still apply: maxTimeMS + margin. */
  get #windowMs (): number { return this.options.maxTimeMS + FENCE_MARGIN_MS }

  /** The fence of an attempt that failed ambiguously at `at` (clock time): its window after that, and after the server's first answer since. */
  #fenceFrom (at: number): Fence {
    const windowMs = this.#windowMs
    return { until: at + windowMs, proof: this.liveness.replyAfter(at), windowMs }
  }

  /** The fence after the last closed connection of an isolation (none if no connection closed). */
  #closedFence (closed: { at: number } | undefined): Fence | undefined {
    return closed === undefined || closed.at === 0 ? undefined : this.#fenceFrom(closed.at)
  }

  /** close() gave up waiting: a write that would be sent again is told so instead (returns how many). */
  #toldClosed (op: WriteOp): number {
    return this.settler.reject(op, closedError(op, 'before this write could be sent again'))
  }

  /** Writes (in flight) sent again once `fence` ends, as a retry; told so instead if close() gave up. */
  #retryAfter (queue: CollectionQueue, ops: WriteOp[], fence: Fence): void {
    if (this.#final) {
      for (const op of ops) this.#toldClosed(op)
      return
    }
    this.retries.schedule(new Batch(queue, ops, false), fence)
  }

  /** Writes to send again at the head of their queue (unless close() gave up: then they are told so); those not yet back in state QUEUED count their attempt. */
  #requeue (queue: CollectionQueue, again: WriteOp[]): void {
    if (this.#final) {
      for (const op of again) this.#toldClosed(op)
      return
    }
    for (const op of again) if (op.state === IN_FLIGHT) op.sendAgain()
    queue.requeueFront(again)
  }

  /**
   * The driver threw while building or serializing the bulkWrite, before any I/O (send-check.ts#serializerFailure; if not: false, nothing done). The writes
   * that cannot be serialized now (changed after submit) fail alone, naming the field; the others go again at the head of their queue, this attempt uncounted.
   */
  #unsendable (batch: Batch<CollectionQueue>, err: unknown): boolean {
    const read = serializerFailure(err, this.#wire.mayHaveRetried(batch.route))
    if (read === NOT_SERIALIZER) return false
    const { again, refused } = afterUnsendable(batch.ops.filter(op => op.state !== SETTLED), err, batch.queue.name)
    if (read === SERIALIZER_IF_FOUND && !foundUnsendable(refused)) return false
    for (const op of again) op.sendAgain(false) // never sent: this attempt does not count
    for (const r of refused) this.settler.reject(r.op, r.err)
    this.#requeue(batch.queue, again)
    this.#return(batch)
    this.options.logger?.warn({ collection: batch.queue.name, ops: batch.size, refused: refused.length, err: describeError(err) }, 'write buffer: writes that cannot be serialized')
    return true
  }

  /**
   * No per-write errors: the failure is the whole bulkWrite's. When its outcome is unknown,
   * the attempt may still be executing on the server: every target of the batch stays fenced
   * (nothing sent to it, not even the retry) until the attempt can no longer apply, which
   * maxTimeMS bounds. So a late attempt never lands after a later write to its document.
   * A server's answer (`ok: 0`) ends its command: on a standalone server, whose driver never
   * retries on its own, nothing is left running to fence. `failure`: what `cause` means
   * (#classifyWhole, or #classifyRefusal for a refusal); it failed every write of the batch not
   * settled yet.
   */
  #wholeFailed (batch: Batch<CollectionQueue>, cause: DriverFailure, failure: Failure, span: TraceLink | undefined): void {
    this.#failedParts(batch, [{ cause, failure, ops: batch.ops.filter(op => op.state !== SETTLED) }], span)
  }

  /**
   * Writes failed, in parts, each part by its own failure (a whole batch is one part; an
   * isolation's halves that failed otherwise are one part each: a half cut on the wire is not
   * judged by a sibling that was never sent). Each write is rejected or kept to send again;
   * then the batch is returned once, and the writes to send again, and those told `unknown`,
   * hold their targets again in that same turn (Retries), each part with its own fence.
   */
  #failedParts (batch: Batch<CollectionQueue>, parts: ReadonlyArray<{ cause: DriverFailure, failure: Failure, ops: WriteOp[] }>, span: TraceLink | undefined): void {
    const held = parts.map(p => this.#judge(batch, p.cause, p.failure, p.ops))
    this.#return(batch)
    // held again before any pump can run: a later write to these targets must not overtake them
    for (const { retry, fenced, fence } of held) {
      if (retry.length > 0) {
        // the retry's span is a child of this attempt's
        if (span !== undefined) for (const op of retry) op.retryAfter(span)
        this.retries.schedule(new Batch(batch.queue, retry, false), fence)
      }
      if (fenced.length > 0 && fence !== undefined) this.retries.fence(new Batch(batch.queue, fenced, false), fence)
    }
  }

  /** Each write of `live` rejected (its caller told) or kept to send again, by `failure`; what must hold its targets, and the fence. */
  #judge (batch: Batch<CollectionQueue>, cause: DriverFailure, failure: Failure, live: WriteOp[]): { retry: WriteOp[], fenced: WriteOp[], fence: Fence | undefined } {
    const name = batch.queue.name
    const now = this.options.clock.now()
    const answered = cause.kind === 'refusal' && cause.code !== undefined && !this.#wire.mayResend(batch.route)
    const fence: Fence | undefined = failure.outcome === 'unknown' && !answered ? this.#fenceFrom(now) : undefined
    const fenceUntil = fence?.until ?? 0
    const retry: WriteOp[] = []
    const fenced: WriteOp[] = []
    let failed = 0
    // a retry goes no sooner than its backoff and the fence: one that would miss its deadline is not made
    const retryAt = Math.max(now + this.options.baseDelayMs, fenceUntil)
    if (failure.outcome === 'unknown') for (const op of live) op.mayHaveApplied()
    const verdicts = live.map(op => afterBatchFailure(op, failure, retryAt, this.options, name))
    // an ordered batch: all go again, or none (outcomes.ts#noneGoesAgain)
    if (noneGoesAgain(batch.queue.ordered, failure.outcome === 'unknown', verdicts.some(v => v !== 'retry'))) {
      for (let i = 0; i < live.length; i++) if (verdicts[i] === 'retry') verdicts[i] = batchFailed(live[i] as WriteOp, failure, name)
    }
    const closed = cause.closedConnection
    for (let i = 0; i < live.length; i++) {
      const op = live[i] as WriteOp
      op.attemptFailed(closed)
      const verdict = verdicts[i] as 'retry' | Error
      if (verdict === 'retry' && !this.#final) {
        retry.push(op)
      } else if (verdict === 'retry') {
        failed += this.#toldClosed(op)
      } else {
        failed += this.settler.reject(op, verdict)
        if (fenceUntil > 0) fenced.push(op)
      }
    }
    if (failed > 0) {
      this.options.logger?.error({ collection: name, ops: batch.size, failed, retrying: retry.length, err: describeError(failure.error) },
        'write buffer: batch failed')
    }
    return { retry, fenced, fence }
  }

  /** Acts on what was decided per write: the applied resolved (told to the cache bus first), the refused rejected, the rest sent again. */
  #apply (queue: CollectionQueue, out: IsolationOutcome, again: WriteOp[] = out.toSendAgain): void {
    const { applied, results } = out
    if (applied.length > 0) {
      this.onAcknowledged?.(queue.name, applied, i => (results[i] as { upsertedId?: unknown }).upsertedId)
      for (let i = 0; i < applied.length; i++) this.settler.resolve(applied[i] as WriteOp, results[i] as WriteResult)
    }
    for (const { op, err } of out.refused) this.settler.reject(op, err)
    queue.uncoalesced(out.uncoalescedCount)
    this.#requeue(queue, again)
  }

  /** Some writes were refused by the server; the others were acknowledged (or never executed). */
  async #partlyFailed (batch: Batch<CollectionQueue>, failed: DriverFailure, err: PartialFailure): Promise<void> {
    if (!indexesProven(batch.ops, await this.identity.reportsStatements())) {
      await this.#refused(batch, failed, undefined, unprovenFailure(failed))
      return
    }
    const queue = batch.queue
    const ids = new PartialFailureReader(err, queue.ordered, queue.name).idsToConfirm(batch.ops)
    const out = new IsolationOutcome()
    partlyRefused(batch.ops, err, queue.ordered, queue.name, out, await confirmInserted(queue.collection, ids))
    this.#apply(queue, out)
    this.#return(batch)
    this.options.logger?.warn({ collection: queue.name, ops: batch.size, acked: out.applied.length, rejected: out.refused.length, code: err.writeErrors[0]?.code },
      'write buffer: writes rejected by the server')
  }
}
