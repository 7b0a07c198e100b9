import type { AnyBulkWriteOperation, Document } from 'mongodb'
import { targetOfId } from './target.js'

/** Op kinds; the write command a kind travels in is `COMMAND_OF[kind]`. */
export const INSERT = 0
export const UPDATE_ONE = 1
export const UPDATE_MANY = 2
export const REPLACE_ONE = 3
export const DELETE_ONE = 4
export const DELETE_MANY = 5
export type Kind = 0 | 1 | 2 | 3 | 4 | 5

/** The key of each kind's bulkWrite model — also the name of the method that made it — by kind. */
export const METHOD_OF = ['insertOne', 'updateOne', 'updateMany', 'replaceOne', 'deleteOne', 'deleteMany'] as const

/**
 * The group a kind travels in; a batch holds one group. The server runs one write command
 * per operation type (insert / update / delete), so a failed command maps to exactly the
 * writes it carried. Multi-document writes (updateMany, deleteMany) get groups of their own:
 * one of them in a bulkWrite makes the driver send the whole bulkWrite without retryable
 * writes.
 */
export const COMMAND_OF: readonly number[] = [0, 1, 3, 1, 2, 4]

/**
 * Where a write is in its life:
 *
 *     CREATED ─→ (WAITING ─→) QUEUED ─→ IN_FLIGHT ─→ SETTLED
 *                               ↑ │        │
 *                               │ └→ LEFT ─┼─→ SETTLED   (past its deadline in its queue)
 *                               └──────────┘             (sent again: retry, not executed, uncoalesced)
 *
 * Each transition is a WriteOp method that checks the state it leaves; `state` is assigned
 * nowhere else. Any state may go to SETTLED (only the Settler settles).
 */
export const CREATED = 0
/** waiting for room (onFull: 'wait'): not yet counted as pending */
export const WAITING = 1
export const QUEUED = 2
export const IN_FLIGHT = 3
export const SETTLED = 4
/** found past its deadline in its queue and taken out of its count: about to settle (timed out) */
export const LEFT = 5
export type State = 0 | 1 | 2 | 3 | 4 | 5

const NAMES = ['created', 'waiting', 'queued', 'in flight', 'settled', 'left its queue']

function illegal (op: WriteOp, to: string): never {
  throw new Error(`internal error: a write ${NAMES[op.state] ?? String(op.state)} cannot become ${to}`)
}

/**
 * The end of a linger that must leave a write with a deadline time to be sent: at most half
 * the time it has left (a linger that ran into the deadline would only time the write out).
 */
export function lingerEndFor (now: number, deadline: number, wanted: number): number {
  if (deadline <= 0) return wanted
  return Math.min(wanted, now + (deadline - now) / 2)
}

/** What a model carries: `{ document }` for inserts, `{ filter, update | replacement, … }` otherwise. */
export interface WriteBody {
  filter: Document
  document?: Document
  update?: Document | Document[]
  replacement?: Document
  upsert?: boolean
  arrayFilters?: unknown
  collation?: unknown
  hint?: unknown
}

/** The span context a write was queued under (an OpenTelemetry SpanContext), to link its batch to. */
export interface TraceLink { traceId: string, spanId: string, traceFlags: number }

/**
 * What a write resolves to. `TId` is the collection's `_id` type: a handle's methods give
 * `IdOf<TSchema>` (see collection.ts); the buffer itself handles ids as `unknown`.
 */
export interface InsertResult<TId = unknown> { insertedId: TId }
/** `upsertedId` only when this write upserted (per-op matched/modified counts do not exist in a bulkWrite). */
export interface UpdateResult<TId = unknown> { upsertedId?: TId }
export type DeleteResult = Record<string, never>
export type WriteResult<TId = unknown> = InsertResult<TId> | UpdateResult<TId> | DeleteResult

/**
 * What a write sees of the queue of its collection (a buffer/collection-queue CollectionQueue,
 * which this module does not import: the queue holds writes, a write only names its queue).
 * An interface because the dependency runs both ways (test/unit/import-cycles.test.ts forbids
 * even a type-only cycle): pointing it one way would mean handing each write's queue apart to
 * Admission's waiters, Aborts, the deadline sweep, the Settler and the detached failures.
 */
export interface OpQueue {
  readonly name: string
  /** queues a write that waited for room */
  push: (op: WriteOp) => void
  /** drops a queued write that will never be sent (aborted, expired) */
  forget: (op: WriteOp) => void
}

/**
 * One write of one caller. A class (not object literals) so every op has the same hidden
 * class; the bulkWrite model is built once at submit time and reused on retries.
 */
let submitted = 0

export class WriteOp {
  #state: State = CREATED
  /** submission order within the process: a write parked behind its target goes after every earlier one (parked.ts) */
  readonly seq = submitted++
  /** times sent (send(), sentAgainInPart(); sendAgain(false) takes back one that never left) */
  #attempts = 0
  /** an attempt may have reached the server without a clear answer (mayHaveApplied()) */
  #maybeApplied = false
  /** its last attempt ended in a connection closed under it (a poison the server drops the connection on, or a cut): a second one isolates its batch */
  #closedBefore = false
  /** the flush() epoch it belongs to (see FlushTracker) */
  #epoch = 0
  /** clock time past which it is rejected with WRITE_BUFFER_TIMEOUT if not yet sent; 0 = none */
  #deadline = 0
  /** later writes of the same target coalesced into this one; settled with it */
  #coalesced: WriteOp[] | null = null
  /** its update travels inside an earlier write's model (it is in that write's `coalesced`) */
  #merged = false
  /** estimated bytes of the writes coalesced into it (their updates travel in its model) */
  #carried = 0
  /** this op's own update, kept while `model` carries the coalesced one (to uncoalesce) */
  #ownUpdate: Document | null = null
  /** never coalesce again (a coalesced op was refused and is retried write by write) */
  #alone = false
  /** the queue of its collection; set when it is submitted, before anything reads it */
  #queue!: OpQueue
  /** its caller declared that its filter matches at most one document (`uniqueFilter`: retry-safety.ts) */
  #uniqueFilter = false
  /** nobody awaits it: its failure goes to onWriteError (see Settler) */
  #detached = false
  /** clock time until which it waits for later same-target writes to coalesce into it; 0 = none */
  #lingerUntil = 0
  /** the span active when it was queued, while tracing records spans */
  #traceLink: TraceLink | undefined = undefined
  /** the span of its last failed attempt, when it is sent again (the retry's span is its child) */
  #retryOf: TraceLink | undefined = undefined
  #signal: AbortSignal | null = null
  #onAbort: (() => void) | null = null
  #resolve!: (r: WriteResult) => void
  #reject!: (e: Error) => void

  #target: string | null

  constructor (
    readonly kind: Kind,
    readonly model: AnyBulkWriteOperation,
    /** null for inserts: computed from `id` only if a conflict check ever needs it */
    target: string | null,
    readonly bytes: number,
    /** the inserted document's _id, or undefined */
    readonly id: unknown,
    /** the _id was generated here (so only our own retry can collide with it) */
    readonly generatedId: boolean
  ) {
    this.#target = target
  }

  get state (): State { return this.#state }
  get closedBefore (): boolean { return this.#closedBefore }
  get epoch (): number { return this.#epoch }
  get deadline (): number { return this.#deadline }
  get coalesced (): readonly WriteOp[] | null { return this.#coalesced }
  get merged (): boolean { return this.#merged }
  get carried (): number { return this.#carried }
  get ownUpdate (): Document | null { return this.#ownUpdate }
  get alone (): boolean { return this.#alone }
  get queue (): OpQueue { return this.#queue }
  get uniqueFilter (): boolean { return this.#uniqueFilter }
  get detached (): boolean { return this.#detached }
  get lingerUntil (): number { return this.#lingerUntil }
  get traceLink (): TraceLink | undefined { return this.#traceLink }
  get resolve (): (r: WriteResult) => void { return this.#resolve }
  get reject (): (e: Error) => void { return this.#reject }

  /** Submitted to `queue`, under the span `traceLink` (while tracing records spans). */
  submitTo (queue: OpQueue, traceLink: TraceLink | undefined): void {
    this.#queue = queue
    this.#traceLink = traceLink
  }

  /** Its caller awaits it: `resolve`/`reject` settle its promise (the Settler's only). */
  awaitedWith (resolve: (r: WriteResult) => void, reject: (e: Error) => void): void {
    this.#resolve = resolve
    this.#reject = reject
  }

  /** Nobody awaits it: a result is dropped, a failure goes to `reject`. */
  detach (ignore: (r: WriteResult) => void, reject: (e: Error) => void): void {
    this.#detached = true
    this.#resolve = ignore
    this.#reject = reject
  }

  /** It belongs to the flush() epoch `epoch` (FlushTracker). */
  joinEpoch (epoch: number): void { this.#epoch = epoch }

  /** It times out at clock time `at` if not yet sent. */
  timeOutAt (at: number): void { this.#deadline = at }

  /** It lingers until clock time `until` (first set at submit; brought forward by a later write whose deadline comes first). */
  linger (until: number): void { this.#lingerUntil = until }

  /** Its caller declared that its filter matches at most one document. */
  declareUniqueFilter (): void { this.#uniqueFilter = true }

  /** `signal` aborts it: `onAbort` listens until it settles (unlisten()). */
  listen (signal: AbortSignal, onAbort: () => void): void {
    this.#signal = signal
    this.#onAbort = onAbort
    signal.addEventListener('abort', onAbort, { once: true })
  }

  /** Settled: its abort listener, if any, is removed. */
  unlisten (): void {
    if (this.#onAbort === null) return
    this.#signal?.removeEventListener('abort', this.#onAbort)
    this.#onAbort = null
    this.#signal = null
  }

  /** Its attempt failed; `closed`: in a connection closed under it (a second such close isolates its batch). */
  attemptFailed (closed: boolean): void { this.#closedBefore = closed }

  /** It is sent again after a failed attempt traced as `span`: the retry's span is a child of it. */
  retryAfter (span: TraceLink): void { this.#retryOf = span }

  /** The span of the failed attempt this send repeats, if any, once: its next attempt is a child of this one's span. */
  takeRetryOf (): TraceLink | undefined {
    const span = this.#retryOf
    if (span !== undefined) this.#retryOf = undefined
    return span
  }

  /**
   * `next` (same target) is coalesced into it: its update becomes `update` (coalesce.ts
   * merged it), and `next` travels and settles with it. Writes coalesced into `next` already
   * (a lingering write) move along, one level deep, and `next` keeps only its own update (to
   * be taken apart again if refused).
   */
  coalesce (next: WriteOp, update: Document): void {
    const body = this.body
    if (this.#ownUpdate === null) this.#ownUpdate = body.update as Document
    body.update = update
    const into = (this.#coalesced ??= [])
    into.push(next)
    next.#merged = true
    this.#carried += next.bytes + next.#carried
    next.#carried = 0
    if (next.#coalesced !== null) {
      into.push(...next.#coalesced)
      next.#coalesced = null
      if (next.#ownUpdate !== null) next.body.update = next.#ownUpdate
      next.#ownUpdate = null
    }
  }

  /**
   * Undoes coalescing: it gets its own update back; the writes coalesced into it are
   * returned, to be retried one by one. None of them will be coalesced again.
   */
  uncoalesce (): WriteOp[] {
    const coalesced = this.#coalesced ?? []
    if (this.#ownUpdate !== null) this.body.update = this.#ownUpdate
    this.#ownUpdate = null
    this.#coalesced = null
    this.#carried = 0
    this.#alone = true
    for (const op of coalesced) {
      op.#alone = true
      op.#merged = false
      op.#maybeApplied ||= this.#maybeApplied // an earlier attempt of the coalesced op may have applied it
    }
    return coalesced
  }

  /** times sent */
  get attempts (): number { return this.#attempts }

  /** true once an attempt may have reached the server without a clear answer */
  get maybeApplied (): boolean { return this.#maybeApplied }

  /** An attempt of it may have reached the server without a clear answer: from now on its outcome is never 'not-sent'. */
  mayHaveApplied (): void { this.#maybeApplied = true }

  /**
   * Sent once more as part of a split batch (isolate.ts), still in flight: one more attempt,
   * for the writes coalesced into it too (they travel in its statement).
   */
  sentAgainInPart (): void {
    if (this.#state !== IN_FLIGHT) illegal(this, 'sent again in part')
    this.#attempts++
    if (this.#coalesced !== null) for (const c of this.#coalesced) c.#attempts = this.#attempts
  }

  /** No room yet (onFull: 'wait'). */
  waitForRoom (): void {
    if (this.#state !== CREATED) illegal(this, 'waiting')
    this.#state = WAITING
  }

  /** Admitted into its queue. */
  enqueue (): void {
    if (this.#state !== CREATED && this.#state !== WAITING) illegal(this, 'queued')
    this.#state = QUEUED
  }

  /** Sent in a bulkWrite: one more attempt. */
  send (): void {
    if (this.#state !== QUEUED) illegal(this, 'in flight')
    this.#state = IN_FLIGHT
    this.#attempts++
  }

  /** Sent in its leader's statement (coalesced into it): the leader's attempt is its own. */
  sendWith (leader: WriteOp): void {
    this.send()
    this.#attempts = leader.#attempts
  }

  /**
   * Back to its queue to be sent again, with the writes coalesced into it (they travel in its
   * update); `counted`: the attempt reached the server (else it is not counted).
   */
  sendAgain (counted = true): void {
    if (this.#state !== IN_FLIGHT) illegal(this, 'queued again')
    this.#state = QUEUED
    if (!counted) this.#attempts--
    if (this.#coalesced !== null) for (const c of this.#coalesced) if (c.#state === IN_FLIGHT) c.sendAgain(counted)
  }

  /** Found past its deadline in its queue: out of its count, about to settle. */
  leaveQueue (): void {
    if (this.#state !== QUEUED) illegal(this, 'left its queue')
    this.#state = LEFT
  }

  /** Settled (Settler only); returns the state it was in. */
  settle (): State {
    const was = this.#state
    this.#state = SETTLED
    return was
  }

  /** same-target key (see target.ts) */
  get target (): string {
    this.#target ??= targetOfId(this.id)
    return this.#target
  }

  /** the op's body inside its bulkWrite model (mutable: coalescing rewrites `update`) */
  get body (): WriteBody {
    return (this.model as unknown as Record<string, WriteBody>)[METHOD_OF[this.kind]] as WriteBody
  }

  /** a generated-_id insert: cannot collide with any other write (the queue's fast path) */
  get fresh (): boolean {
    return this.generatedId && this.kind === INSERT
  }
}
