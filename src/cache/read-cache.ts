import { BSON } from 'mongodb'
import type { Collection, Document, FindOptions } from 'mongodb'
import { realClock, type Clock } from '../clock.js'
import { InvalidWriteError, describe } from '../errors.js'
import type { Logger, ResolvedCacheOptions } from '../options.js'
import { INSERT, type WriteOp } from '../write/write-op.js'
import { raced, remoteFootprint, type BusMessage } from './bus-message.js'
import { CacheBus, type BusStats } from './bus.js'
import { EntryStore } from './entry-store.js'
import type { Filter } from './filter-facts.js'
import { answerOf, safeFootprint, type Answer, type Footprint } from './footprint.js'
import { footprintKeys } from './index-keys.js'
import { Fences } from './fences.js'
import { NotedWrites, type ReadMark } from './noted-writes.js'
import { cacheable, readKey, showsId } from './read-key.js'
import { wellFormed } from './value-keys.js'
import { WriteEffects } from './write-effects.js'

/**
 * Read cache for hot `findOne`s (login lookups): TTL + LRU (entries and bytes), negative
 * answers with their own TTL, single-flight per key.
 *
 * Exact or not at all: only filters the cache decides exactly (top-level equalities on exact
 * scalars: filter-facts.ts) are cached; any other read goes to the server. Cached answers are
 * the server's own BSON bytes, decoded per hit with the collection's BSON options, so a hit
 * has the types an uncached read would have.
 *
 * Read-your-writes, per process: a write through the buffer is applied to the cached answers
 * it may change when it is queued (write-effects.ts, by its footprint: footprint.ts); a miss
 * reads, then checks the writes noted around it that may affect its answer (noted-writes.ts,
 * indexed by footprint): those queued before it and still unsettled are waited for and the read
 * is made again; an answer that raced a write is returned but not cached. If a non-insert write then fails, the collection's entries are dropped (a patch
 * may show a write that did not happen). Other processes' writes are seen after at most ttlMs,
 * or, with the cache bus (bus.ts), when their batch's message arrives.
 *
 * Cache bus: a message drops the entries the remote batch may have changed
 * (write-effects.ts#applyRemote) and fences the loads in flight in its collection: a load
 * sent before the message arrived may hold the old answer, so it is not cached if the
 * message may concern it, and nobody joins it any more. While the subscription is down no
 * entry read more than `offlineTtlMs` ago is served (0: none, every read goes to the
 * server); when it is back everything cached before is dropped.
 */

export interface ReadCacheStats {
  hits: number
  misses: number
  dedupes: number
  invalidations: number
  patches: number
  evictions: number
  /** reads sent to the server because the cache does not key them (filter shape, options, a value the driver transforms) */
  uncacheable: number
  entries: number
  bytes: number
  /** with `cache.bus`: its state and message counts */
  bus?: BusStats
}

/** A read in progress (single-flight). */
interface Flight {
  key: string
  name: string
  projected: boolean
  /** the answer's `_id` is its document's own (see showsId) */
  idKnown: boolean
  /** where the read stands among the writes noted (noted-writes.ts) */
  mark: ReadMark
  /** no write noted since the read was sent could change its answer: a joiner may take it */
  clean: boolean
  /** the noted writes' sequence when the flight began: a reader that came no earlier may take its answer, clean or not */
  firstSeq: number
  /** other instances' batches announced while it runs: they may race it */
  remote: Footprint[]
  /** the bus epoch when the read was sent (the subscription went down or up since: not cached) */
  busEpoch: number
  /** clock time when the read was sent */
  readAt: number
  /** a fence of its collection ended since the read was sent: the answer may be older than the write fenced (fences.ts) */
  fenceEnded: boolean
  promise: Promise<Uint8Array | null>
}

/** Decoding for decisions: numbers keep their BSON types. */
const EXACT = { promoteValues: false, promoteLongs: false } as const
const MAX_REREADS = 3

export class ReadCache {
  readonly #options: ResolvedCacheOptions
  readonly #store: EntryStore
  readonly #effects: WriteEffects
  readonly #noted = new NotedWrites()
  readonly #fences = new Fences()
  #sendNow: () => void = () => {}
  readonly #flights = new Map<string, Flight>()
  readonly #flightsByName = new Map<string, Set<Flight>>()
  #stats = { hits: 0, misses: 0, dedupes: 0, uncacheable: 0 }
  readonly #bus: CacheBus | undefined
  /** the bus's subscription is confirmed (always true without a bus) */
  #trusted: boolean
  /** changes whenever the subscription goes down or comes back */
  #busEpoch = 0
  readonly #clock: Clock

  /** @internal the buffer's, not a user's */
  constructor (options: ResolvedCacheOptions, logger?: Logger, clock: Clock = realClock) {
    this.#options = options
    this.#clock = clock
    this.#store = new EntryStore(options, clock)
    this.#effects = new WriteEffects(this.#store)
    this.#trusted = options.bus === undefined
    this.#bus = options.bus === undefined
      ? undefined
      : new CacheBus(options.bus, logger, {
        remote: message => { this.#remote(message) },
        online: () => { this.#busChanged(true) },
        offline: () => { this.#busChanged(false) },
      }, clock)
  }

  /** The buffer hands in a way to send what is queued now (a read waiting for writes). @internal */
  bindKick (sendNow: () => void): void { this.#sendNow = sendNow }

  stats (): ReadCacheStats {
    return {
      ...this.#stats,
      invalidations: this.#effects.invalidations,
      patches: this.#effects.patches,
      evictions: this.#store.evictions,
      entries: this.#store.size,
      bytes: this.#store.bytes,
      ...(this.#bus === undefined ? {} : { bus: this.#bus.stats() }),
    }
  }

  clear (): void {
    this.#store.clear()
  }

  /** Stops the cache bus (its connections; a given client is left open). @internal */
  async close (): Promise<void> {
    this.#store.clear()
    await this.#bus?.close()
  }

  /** A batch was acknowledged: tell the other instances (with the cache bus). Never throws. @internal */
  published (name: string, ops: readonly WriteOp[], upsertedIdOf: (index: number) => unknown): void {
    this.#bus?.publish(name, ops, upsertedIdOf)
  }

  /** Writes told `unknown` are fenced (`started`: their attempt may still land, fences.ts), or no longer: entries may be older than them, here and (bus, at its end) elsewhere. @internal */
  fenced (name: string, ops: readonly WriteOp[], started: boolean): void {
    if (started) this.#fences.start(name)
    else {
      this.#fences.end(name)
      // a read sent before the end may hold the answer from before the attempt landed
      for (const flight of this.#flightsByName.get(name) ?? []) flight.fenceEnded = true
      this.#bus?.publishUnknown(name, ops)
    }
    this.#effects.invalidateAll(name)
  }

  /** Another instance's batch: drop what it may have changed, fence the loads it may race. */
  #remote (message: BusMessage): void {
    const { name } = message
    const fp = remoteFootprint(message.write)
    this.#effects.applyRemote(name, fp)
    const flights = this.#flightsByName.get(name)
    if (flights === undefined) return
    for (const flight of flights) {
      flight.remote.push(fp)
      // a read starting from now must not take an answer read before the write
      if (this.#flights.get(flight.key) === flight) this.#flights.delete(flight.key)
    }
  }

  #busChanged (online: boolean): void {
    this.#trusted = online
    this.#busEpoch++
    // back online: messages were missed meanwhile, nothing cached so far can be trusted
    if (online) this.#store.clear()
    for (const flight of this.#flights.values()) {
      if (this.#flights.get(flight.key) === flight) this.#flights.delete(flight.key)
    }
  }

  /** Whether an answer read at `readAt` (clock time) may be served: always with a live bus, only a young one without. */
  #servable (readAt: number): boolean {
    if (this.#trusted) return true
    const offlineTtlMs = this.#options.bus?.offlineTtlMs ?? 0
    return offlineTtlMs > 0 && this.#clock.now() - readAt < offlineTtlMs
  }

  /** No fence of its collection stands, nor ended, since the flight's read was sent. */
  #unfenced (flight: Flight): boolean {
    return this.#fences.allows(flight.name) && !flight.fenceEnded
  }

  /** @internal the buffer's, not a user's */
  async findOne (collection: Collection, name: string, filter: unknown, options?: FindOptions): Promise<Document | null> {
    if (filter === null || typeof filter !== 'object' || Array.isArray(filter)) {
      throw new InvalidWriteError(`filter must be a plain object, got ${describe(filter)}`)
    }
    // strings as the driver sends them: '\uD800' and '\uFFFD' are one value on the server
    return this.#findOne(collection, name, wellFormed(filter as Filter), options, this.#noted.seq)
  }

  /** `since`: the noted writes' sequence when the caller asked (the writes before it are the ones its answer must show). */
  async #findOne (collection: Collection, name: string, f: Filter, options: FindOptions | undefined, since: number): Promise<Document | null> {
    // from here on the collection's writes are indexed, and the ones listed before any read asked
    // are indexed now (past INDEX_AT_WATCH of them, this read and the next wait for them all)
    const backlog = this.#noted.watch(name, this.#sendNow)
    if (backlog !== undefined) await backlog
    if (!cacheable(f, options)) {
      this.#stats.uncacheable++
      // read-your-writes still holds: the writes this read may depend on land first
      await this.#noted.settled(this.#noted.all(name), this.#sendNow)
      return collection.findOne(f, options)
    }
    const projection = options?.projection
    const key = readKey(name, f, projection)
    const decode = (bytes: Uint8Array | null): Document | null => bytes === null ? null : BSON.deserialize(bytes, collection.bsonOptions)
    const now = this.#clock.now()
    const entry = this.#store.get(key, now)
    if (entry !== undefined && this.#servable(entry.readAt)) {
      this.#stats.hits++
      return decode(entry.bytes)
    }
    const flight = this.#flights.get(key)
    if (flight !== undefined) {
      // Join the read in progress. Its answer shows the writes noted before it began (it waits
      // for them), as its own caller is told; a write noted between its start and our call may
      // be one we must see: then take it only if no write noted since it was sent could change
      // it. Otherwise ask again: any read in progress by then began after our call, so this
      // happens at most once per call (`since` stays ours).
      const bytes = await flight.promise
      if (flight.clean || flight.firstSeq >= since) {
        this.#stats.dedupes++
        return decode(bytes)
      }
      return this.#findOne(collection, name, f, options, since)
    }
    this.#stats.misses++
    const own: Flight = {
      key, name, projected: projection !== undefined, idKnown: projection === undefined || showsId(projection), mark: { startSeq: 0, settleMark: 0 }, clean: false, firstSeq: this.#noted.seq, remote: [], busEpoch: 0, readAt: 0, fenceEnded: false, promise: null as unknown as Promise<Uint8Array | null>,
    }
    // registered before the load starts: its `finally` must find it to remove it
    this.#flights.set(key, own)
    let byName = this.#flightsByName.get(name)
    if (byName === undefined) this.#flightsByName.set(name, byName = new Set())
    byName.add(own)
    own.promise = this.#load(collection, f, options, own)
    return decode(await own.promise)
  }

  async #load (collection: Collection, filter: Filter, options: FindOptions | undefined, flight: Flight): Promise<Uint8Array | null> {
    const { name } = flight
    try {
      let bytes: Uint8Array | null = null
      let answer: Answer
      for (let read = 0; ; read++) {
        flight.mark = this.#noted.begin(flight)
        // a read by _id waits for the writes queued to that document first (cheap and exact)
        const before = this.#noted.toDocument(name, filter)
        if (before.length > 0) await this.#noted.settled(before, this.#sendNow)
        flight.remote = []
        flight.fenceEnded = false
        flight.busEpoch = this.#busEpoch
        flight.readAt = this.#clock.now()
        bytes = await collection.findOne<Uint8Array>(filter, { ...options, raw: true })
        // writes queued before this read that may change its answer: wait for them, read again
        answer = answerOf(filter, exactDoc(bytes), flight.projected, flight.idKnown)
        const check = this.#noted.check(name, answer, flight.mark)
        flight.clean = !check.noted
        if (check.missed.length === 0 && !check.late) break
        await this.#noted.settled(check.missed, this.#sendNow)
        if (read + 1 >= MAX_REREADS) {
          // still racing writes: answer from a read made after they all settled, uncached
          flight.clean = false
          return await collection.findOne<Uint8Array>(filter, { ...options, raw: true })
        }
      }
      // cache only if no write noted since the read was sent could have changed the answer,
      // here or (cache bus) in another instance, and the bus said nothing was missed meanwhile
      if (flight.clean && flight.busEpoch === this.#busEpoch && !raced(flight.remote, answer) && this.#servable(flight.readAt) && this.#unfenced(flight)) {
        const doc = answer.found ? answer.doc() : null
        const ttlMs = bytes === null ? this.#options.negativeTtlMs : this.#options.ttlMs
        if (ttlMs > 0) this.#store.put(flight.key, name, filter, flight.projected, bytes, doc, ttlMs, flight.readAt, flight.idKnown)
      }
      return bytes
    } finally {
      this.#noted.end(flight)
      if (this.#flights.get(flight.key) === flight) this.#flights.delete(flight.key)
      // a collection with no read in progress keeps no set: names may be many (a collection per tenant)
      const byName = this.#flightsByName.get(name)
      if (byName !== undefined && byName.delete(flight) && byName.size === 0) this.#flightsByName.delete(name)
    }
  }

  /** A write was queued: keep every cached answer it may change in step with it. Never throws. @internal */
  noteWrite (name: string, op: WriteOp): void {
    // a collection no read has asked about has no entries and no reads: its write is only listed
    if (!this.#noted.watches(name)) {
      this.#noted.defer(name, op)
      return
    }
    const fp = safeFootprint(op)
    const keys = footprintKeys(fp)
    const mayPatch = !this.#noted.filterWriteUnsettled(name)
    this.#noted.add(name, op, fp, keys)
    this.#effects.apply(name, op, fp, keys, mayPatch)
  }

  /** A write settled. A failed one may have been patched into entries (not an insert), or applied (told `unknown`: other instances are told too): drop them. @internal */
  settleWrite (name: string, op: WriteOp, ok: boolean, unknown = false): void {
    const caughtUp = this.#noted.settle(name, op)
    if (caughtUp !== undefined) this.#effects.caughtUp(name, caughtUp)
    if (!ok && (op.kind !== INSERT || unknown)) this.#effects.invalidateAll(name)
    if (unknown) this.#bus?.gatherUnknown(name, op)
  }
}

function exactDoc (bytes: Uint8Array | null): Document | null {
  return bytes === null ? null : BSON.deserialize(bytes, EXACT)
}
