/**
 * A tiny in-process stand-in for the part of a mongodb `Db` the write buffer uses:
 * `db.collection(name)` → `{ collectionName, bulkWrite, find().toArray(), findOne }`, and
 * `db.client.topology` (read by mongo/topology.ts to know whether the driver may retry).
 *
 * Every bulkWrite is logged (collection, a snapshot of the models, options, when it started
 * and when it was answered) and answered by a responder: the next one queued with `next()`,
 * else `fallback` (by default `apply`: apply the models to an in-memory store, refuse a
 * duplicate _id with a writeError 11000 as the server would). A responder may return `HOLD`:
 * the call then stays pending until the test answers it (`call.answer(...)`).
 */
import { BSON, ObjectId, type AnyBulkWriteOperation, type BulkWriteOptions, type Db, type Document } from 'mongodb'

export type Topology = 'standalone' | 'replset' | 'none'

/** What answers one bulkWrite: its return value resolves the call, a throw rejects it. */
export type Responder = (call: BulkCall, db: FakeDb) => unknown

export const HOLD: unique symbol = Symbol('hold')

export interface WriteErrorSpec { index: number, code: number, errmsg?: string }

/** `{ kind: body }` of a model, the body shallow-copied at send time (coalescing swaps `update`). */
export type ModelSnapshot = Record<string, Document>

export class BulkCall {
  /** when it started / was answered, on the fake's one clock (answeredAt -1: still pending) */
  answeredAt = -1
  readonly models: ModelSnapshot[]
  readonly #resolve: (v: unknown) => void
  readonly #reject: (e: unknown) => void
  readonly promise: Promise<unknown>

  constructor (
    readonly db: FakeDb,
    readonly collection: string,
    /** the models exactly as given (the buffer reuses them on retries) */
    readonly raw: AnyBulkWriteOperation[],
    readonly options: BulkWriteOptions,
    readonly startedAt: number
  ) {
    this.models = raw.map(m => {
      const [kind, body] = Object.entries(m)[0] as [string, Document]
      return { [kind]: { ...body } }
    })
    let settle!: { resolve: (v: unknown) => void, reject: (e: unknown) => void }
    this.promise = new Promise((resolve, reject) => { settle = { resolve, reject } })
    this.#resolve = settle.resolve
    this.#reject = settle.reject
  }

  get pending (): boolean { return this.answeredAt === -1 }
  get kinds (): string[] { return this.models.map(m => Object.keys(m)[0] as string) }
  /** the model bodies */
  get bodies (): Document[] { return this.models.map(m => Object.values(m)[0] as Document) }
  /** `_id` of each model: the inserted document's, or the filter's */
  get ids (): unknown[] { return this.bodies.map(b => (b.document ?? b.filter)?._id) }

  /** Answers a held call (by default: apply it). */
  answer (responder: Responder = apply): void {
    if (!this.pending) throw new Error('this bulkWrite was already answered')
    let value: unknown
    try {
      value = responder(this, this.db)
    } catch (err) {
      this.answeredAt = this.db.tick()
      this.#reject(err)
      this.db.notify()
      return
    }
    if (value === HOLD) return
    this.answeredAt = this.db.tick()
    this.#resolve(value)
    this.db.notify()
  }
}

// ---------------------------------------------------------------- driver-shaped errors

interface ResultCounts { insertedCount?: number, matchedCount?: number, modifiedCount?: number, deletedCount?: number, upsertedCount?: number }
interface BulkResultInit extends ResultCounts {
  upsertedIds?: Record<number, unknown>
  writeConcernError?: { code: number, errmsg: string }
}

/** A BulkWriteResult-like object (the fields the buffer reads). */
export function bulkResult (init: BulkResultInit = {}): Document {
  const { writeConcernError, ...rest } = init
  return {
    insertedCount: 0,
    matchedCount: 0,
    modifiedCount: 0,
    deletedCount: 0,
    upsertedCount: 0,
    upsertedIds: {},
    ...rest,
    getWriteConcernError: () => writeConcernError,
  }
}

function named (name: string, message: string, extra: Document = {}): Error {
  const err = new Error(message)
  Object.defineProperty(err, 'name', { value: name })
  return Object.assign(err, extra)
}

/** MongoBulkWriteError with per-write errors, as `handleWriteError` throws it. */
export function bulkWriteError (writeErrors: WriteErrorSpec[], result: Document = bulkResult()): Error {
  const errs = writeErrors.map(w => ({ errmsg: `E${w.code} fake write error`, ...w }))
  return named('MongoBulkWriteError', errs[0]?.errmsg ?? 'write operation failed', { code: errs[0]?.code, writeErrors: errs, result })
}

export function networkError (): Error {
  return named('MongoNetworkError', 'connection 1 to 127.0.0.1:27017 closed')
}

/**
 * What the driver (mongodb 7.9) throws when the connection is reset while a bulkWrite waits to
 * write ('drain'): the socket's own error, a plain Error, wrapped like a network error.
 */
export function wrappedSocketError (code = 'ECONNRESET'): Error {
  const cause = Object.assign(new Error(`write ${code}`), { code, errno: -104, syscall: 'write' })
  return named('MongoBulkWriteError', cause.message, { errorResponse: cause, writeErrors: [], result: bulkResult() })
}

/** What the driver throws when the connection drops under a bulkWrite: the network error, wrapped. */
export function wrappedNetworkError (result: Document = bulkResult()): Error {
  const cause = networkError()
  return named('MongoBulkWriteError', cause.message, { errorResponse: cause, writeErrors: [], result })
}

/** The server refused the whole command (`ok: 0`), as the driver reports it. */
export function commandError (code: number, message = `fake refusal ${code}`): Error {
  return named('MongoServerError', message, { code, errorResponse: { ok: 0, code, errmsg: message } })
}

export function serverSelectionError (): Error {
  return named('MongoServerSelectionError', 'Server selection timed out after 30000 ms')
}

/** A write concern error with no write errors (the driver throws it as a MongoBulkWriteError). */
export function writeConcernError (result: Document = bulkResult()): Error {
  return named('MongoBulkWriteError', 'waiting for replication timed out',
    { code: 64, errorResponse: { code: 64, errmsg: 'waiting for replication timed out' }, writeErrors: [], result })
}

// ---------------------------------------------------------------- responders

/** Applies the models to the store, as the server would (unordered: past errors; ordered: stop at the first). */
export const apply: Responder = call => {
  const r = call.db.applyModels(call.collection, call.raw, call.options.ordered === true)
  if (r.writeErrors.length > 0) throw bulkWriteError(r.writeErrors, bulkResult(r.counts))
  return bulkResult(r.counts)
}

export const hold: Responder = () => HOLD

/** Resolves with `value` (nothing applied). */
export const resolveWith = (value: unknown): Responder => () => value

/** Rejects with `err`; with `applied`, the models are applied first (an answer lost on the way back). */
export const rejectWith = (err: Error | (() => Error), applied = false): Responder => call => {
  if (applied) call.db.applyModels(call.collection, call.raw, call.options.ordered === true)
  throw typeof err === 'function' ? err() : err
}

// ---------------------------------------------------------------- the store

export function keyOf (id: unknown): string {
  return BSON.EJSON.stringify({ v: id }, { relaxed: false })
}

function matches (doc: Document, filter: Document): boolean {
  for (const [k, v] of Object.entries(filter)) {
    if (isIn(v)) {
      if (!((v as Document).$in as unknown[]).some(x => keyOf(x) === keyOf(doc[k]))) return false
    } else if (keyOf(v) !== keyOf(doc[k])) {
      return false
    }
  }
  return true
}

/**
 * The stored documents `filter` may match: with an `_id` that is a value (not `$in`), the one
 * stored under its key, the store's own index; else all of them. A lookup, not a scan: applying
 * 100,000 upserts by scan is quadratic, and a test's cleanup (harness.ts) applies what it left.
 */
function candidates (store: Map<string, Document>, filter: Document): Iterable<Document> {
  if (!('_id' in filter) || isIn(filter._id)) return store.values()
  const doc = store.get(keyOf(filter._id))
  return doc === undefined ? [] : [doc]
}

function isIn (v: unknown): boolean {
  return v !== null && typeof v === 'object' && Array.isArray((v as Document).$in)
}

function setPath (doc: Document, path: string, value: unknown): void {
  const parts = path.split('.')
  let d = doc
  for (const p of parts.slice(0, -1)) d = (d[p] ??= {}) as Document
  d[parts[parts.length - 1] as string] = value
}

function getPath (doc: Document, path: string): unknown {
  let d: unknown = doc
  for (const p of path.split('.')) d = (d as Document | undefined)?.[p]
  return d
}

function unsetPath (doc: Document, path: string): void {
  const parts = path.split('.')
  const parent = getPath(doc, parts.slice(0, -1).join('.')) as Document | undefined
  if (parts.length === 1) delete doc[path]
  else if (parent !== undefined) delete parent[parts[parts.length - 1] as string]
}

function applyUpdate (doc: Document, update: Document, inserting: boolean): void {
  for (const [op, fields] of Object.entries(update)) {
    for (const [path, value] of Object.entries(fields as Document)) {
      if (op === '$set' || (op === '$setOnInsert' && inserting)) setPath(doc, path, value)
      else if (op === '$unset') unsetPath(doc, path)
      else if (op === '$inc') setPath(doc, path, ((getPath(doc, path) as number | undefined) ?? 0) + (value as number))
      else if (op !== '$setOnInsert') throw new Error(`fake-db: unsupported update operator ${op}`)
    }
  }
}

// ---------------------------------------------------------------- the fake

class FakeCollection {
  constructor (readonly db: FakeDb, readonly collectionName: string) {}

  bulkWrite (models: AnyBulkWriteOperation[], options: BulkWriteOptions = {}): Promise<unknown> {
    return this.db.bulkWrite(this.collectionName, models, options)
  }

  find (filter: Document, options?: Document): { toArray: () => Promise<Document[]> } {
    return { toArray: () => this.db.find(this.collectionName, filter, options) }
  }

  async findOne (filter: Document, options?: { raw?: boolean }): Promise<Document | Uint8Array | null> {
    const doc = this.db.docs(this.collectionName).find(d => matches(d, filter)) ?? null
    return doc !== null && options?.raw === true ? BSON.serialize(doc) : doc // the read cache reads raw
  }
}

export interface FindCall { collection: string, filter: Document, options: Document | undefined }

export class FakeDb {
  readonly calls: BulkCall[] = []
  readonly finds: FindCall[] = []
  /** answers a bulkWrite when no `next()` answer is queued */
  fallback: Responder = apply
  /** when set, find() rejects with it */
  findError: Error | null = null
  readonly client: Document | undefined
  /**
   * What `buildInfo` answers: MongoDB's own by default (the fake plays MongoDB's rules), or a
   * compatible server's (FerretDB's fields), whose whole-command refusals prove nothing.
   */
  server: 'mongodb' | 'ferretdb' = 'mongodb'
  /** commands run through `db.command()` (buildInfo, ping) */
  readonly commands: Document[] = []
  /** when set, db.command() rejects with it */
  commandError: Error | null = null
  /** when set, a ping is answered only once it resolves (a paused server) */
  pingGate: Promise<void> | null = null
  readonly #next: Responder[] = []
  readonly #collections = new Map<string, FakeCollection>()
  readonly #store = new Map<string, Map<string, Document>>()
  readonly #watchers = new Set<() => void>()
  #clock = 0

  constructor (topology: Topology = 'standalone') {
    if (topology !== 'none') {
      const type = topology === 'standalone' ? 'Standalone' : 'RSPrimary'
      this.client = { topology: { description: { servers: new Map([['127.0.0.1:27017', { type }]]) } } }
    }
  }

  /** The one cast: what the WriteBuffer is given. */
  get db (): Db { return this as unknown as Db }

  /** `db.command()`: buildInfo (see `server`) and ping. */
  async command (cmd: Document): Promise<Document> {
    this.commands.push(cmd)
    await Promise.resolve()
    if (this.commandError !== null) throw this.commandError
    if ('buildInfo' in cmd) {
      return this.server === 'mongodb'
        ? { version: '8.0.4', gitVersion: 'bc35ab4305d9920d9d0491c1c9ef9b72383d31f9', allocator: 'tcmalloc', ok: 1 }
        : { version: '7.0.42', gitVersion: 'unknown', ferretdbVersion: 'v1.24.2', ok: 1 }
    }
    if (this.pingGate !== null) await this.pingGate
    return { ok: 1 }
  }

  /** The fake's clock: one step per bulkWrite start and answer. */
  tick (): number {
    return ++this.#clock
  }

  /** Tells `until()` waiters that something happened. */
  notify (): void {
    for (const w of this.#watchers) w()
  }

  collection (name: string): FakeCollection {
    let c = this.#collections.get(name)
    if (c === undefined) this.#collections.set(name, c = new FakeCollection(this, name))
    return c
  }

  /** Queues the answers of the next bulkWrites, in order. */
  next (...responders: Responder[]): this {
    this.#next.push(...responders)
    return this
  }

  bulkWrite (collection: string, models: AnyBulkWriteOperation[], options: BulkWriteOptions): Promise<unknown> {
    const call = new BulkCall(this, collection, models, options, this.tick())
    this.calls.push(call)
    call.answer(this.#next.shift() ?? this.fallback)
    this.notify()
    return call.promise
  }

  async find (collection: string, filter: Document, options: Document | undefined): Promise<Document[]> {
    this.finds.push({ collection, filter, options })
    if (this.findError !== null) throw this.findError
    return this.docs(collection).filter(d => matches(d, filter))
  }

  /** bulkWrites not answered yet */
  get held (): BulkCall[] { return this.calls.filter(c => c.pending) }

  /** Resolves once `test()` holds, checked at every bulkWrite start and answer (fails after `ms`). */
  until (test: () => boolean, what = 'condition', ms = 2000): Promise<void> {
    if (test()) return Promise.resolve()
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#watchers.delete(check)
        reject(new Error(`fake-db: timed out waiting for ${what} (${this.calls.length} bulkWrites so far)`))
      }, ms)
      const check = (): void => {
        if (!test()) return
        clearTimeout(timer)
        this.#watchers.delete(check)
        resolve()
      }
      this.#watchers.add(check)
    })
  }

  /** Resolves once `n` bulkWrites have started; returns the n-th. */
  async waitForCalls (n: number): Promise<BulkCall> {
    await this.until(() => this.calls.length >= n, `${n} bulkWrite(s)`)
    return this.calls[n - 1] as BulkCall
  }

  // ---- store

  docs (collection: string): Document[] {
    return [...(this.#store.get(collection)?.values() ?? [])]
  }

  doc (collection: string, id: unknown): Document | undefined {
    return this.#store.get(collection)?.get(keyOf(id))
  }

  seed (collection: string, ...docs: Document[]): void {
    for (const d of docs) this.#coll(collection).set(keyOf(d._id), structuredCloneDoc(d))
  }

  #coll (name: string): Map<string, Document> {
    let m = this.#store.get(name)
    if (m === undefined) this.#store.set(name, m = new Map())
    return m
  }

  applyModels (collection: string, models: AnyBulkWriteOperation[], ordered: boolean): { writeErrors: WriteErrorSpec[], counts: BulkResultInit } {
    const store = this.#coll(collection)
    const writeErrors: WriteErrorSpec[] = []
    const counts = { insertedCount: 0, matchedCount: 0, modifiedCount: 0, deletedCount: 0, upsertedCount: 0, upsertedIds: {} as Record<number, unknown> }
    for (let i = 0; i < models.length; i++) {
      const [kind, body] = Object.entries(models[i] as Document)[0] as [string, Document]
      if (kind === 'insertOne') {
        const doc = body.document as Document
        if (store.has(keyOf(doc._id))) {
          writeErrors.push({ index: i, code: 11000, errmsg: `E11000 duplicate key error dup key: { _id: ${keyOf(doc._id)} }` })
          if (ordered) break
          continue
        }
        store.set(keyOf(doc._id), structuredCloneDoc(doc))
        counts.insertedCount++
        continue
      }
      const filter = body.filter as Document
      const found = [...candidates(store, filter)].filter(d => matches(d, filter))
      const targets = kind === 'updateMany' || kind === 'deleteMany' ? found : found.slice(0, 1)
      if (kind === 'deleteOne' || kind === 'deleteMany') {
        for (const d of targets) store.delete(keyOf(d._id))
        counts.deletedCount += targets.length
        continue
      }
      counts.matchedCount += targets.length
      for (const d of targets) {
        if (kind === 'replaceOne') {
          store.set(keyOf(d._id), { _id: d._id, ...structuredCloneDoc(body.replacement as Document) })
        } else {
          applyUpdate(d, body.update as Document, false)
        }
        counts.modifiedCount++
      }
      if (targets.length === 0 && body.upsert === true) {
        const doc: Document = {}
        for (const [k, v] of Object.entries(filter)) if (!k.startsWith('$')) doc[k] = v
        doc._id ??= new ObjectId()
        if (kind === 'replaceOne') Object.assign(doc, structuredCloneDoc(body.replacement as Document))
        else applyUpdate(doc, body.update as Document, true)
        store.set(keyOf(doc._id), doc)
        counts.upsertedCount++
        counts.upsertedIds[i] = doc._id
      }
    }
    return { writeErrors, counts }
  }
}

/** A copy for the store (so the caller's object and the stored one never alias). */
function structuredCloneDoc (d: Document): Document {
  return BSON.deserialize(BSON.serialize(d), { promoteValues: true }) as Document
}

/** Settles a promise into a plain record, for asserting on many writes at once. */
export type Settled<T> = { status: 'fulfilled', value: T } | { status: 'rejected', reason: Error & Document }
export async function settle<T> (p: Promise<T>): Promise<Settled<T>> {
  try {
    return { status: 'fulfilled', value: await p }
  } catch (reason) {
    return { status: 'rejected', reason: reason as Error & Document }
  }
}

/** Tracks whether a promise has settled yet (without awaiting it). */
export function track<T> (p: Promise<T>): { readonly done: boolean, readonly promise: Promise<Settled<T>> } {
  const t = { done: false, promise: settle(p) }
  t.promise.then(() => { t.done = true })
  return t
}

/** Lets pending microtasks, timers and immediates run (`ms` of real time). */
export function pause (ms = 0): Promise<void> {
  return new Promise(resolve => setTimeout(resolve, ms))
}
