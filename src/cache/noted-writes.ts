import type { Filter } from './filter-facts.js'
import { idKeyOf } from './filter-facts.js'
import { INSERT, SETTLED, type WriteOp } from '../write/write-op.js'
import { affects, byFilter, safeFootprint, type Answer, type Footprint } from './footprint.js'
import { answerKeys, docFieldKeys, documentKeys, footprintKeys, idIndexKey, newIdIndexKey } from './index-keys.js'
import { KeyIndex } from './key-index.js'

/** A write the cache has seen queued: unsettled, or settled and kept for the reads that ran meanwhile. */
interface Noted {
  name: string
  /** order of queuing */
  seq: number
  fp: Footprint
  /** its footprint's index keys */
  keys: readonly string[]
  /** the id key of the document it is known to touch (caught up when none of its writes is unsettled) */
  idKey: string | undefined
  /** -1 while unsettled; else the settle count when it settled */
  settled: number
  /** found by another field than `_id` (or by none the cache can read): it may touch any document */
  byFilter: boolean
}

/** A collection's writes noted before a read asked about it: listed in queue order from `head` (settled ones dropped now and then), and how many are unsettled. */
interface Unindexed { ops: WriteOp[], head: number, unsettled: number }

/** Unsettled writes a collection's first read indexes at once (each costs CPU: bench/README.md, *Measured costs behind constants*); above it, its reads wait for them instead. */
const INDEX_AT_WATCH = 1000

/** What the writes noted around one read say about its answer. */
export interface ReadCheck {
  /** queued before the read was sent and still unsettled, and may change its answer: wait, read again */
  missed: WriteOp[]
  /** queued before the read was sent, settled while it ran, may change it: the answer may or may not show it */
  late: boolean
  /** queued after the read was sent (unsettled or not), may change it: the answer is not cached */
  noted: boolean
}

/** Where a read stands: writes queued up to `startSeq` are before it, settles from `settleMark` on during it. */
export interface ReadMark { startSeq: number, settleMark: number }

const NONE: readonly WriteOp[] = []

/**
 * The writes the cache has seen queued, indexed by their footprint's keys (footprint.ts), so
 * that a read checks only the writes that may affect its answer: O(those), never O(all
 * unsettled). A settled write stays listed while a read that ran when it settled is still
 * running (that read may or may not show it), then goes; reads are kept in the order they
 * started, so the oldest one says what may go.
 */
export class NotedWrites {
  /** sequence number of the next write */
  seq = 0
  #settles = 0
  readonly #noted = new Map<WriteOp, Noted>()
  /** the noted writes, listed under their footprint's keys */
  readonly #index = new KeyIndex<WriteOp>()
  /** settled writes still listed, in settle order (#head: the first still there) */
  #kept: WriteOp[] = []
  #head = 0
  /** reads running, in the order they (last) started, with their settle marks */
  readonly #reads = new Map<object, number>()
  readonly #catchingUp = new Map<WriteOp, Array<() => void>>()
  /** collections a read has asked about: their writes are indexed as they are noted */
  readonly #watched = new Set<string>()
  /** per collection no read has asked about yet: its writes, not indexed */
  readonly #unindexed = new Map<string, Unindexed>()
  /** per watched collection whose first read found more than INDEX_AT_WATCH listed writes: until they have settled */
  readonly #backlogs = new Map<string, Promise<unknown>>()
  /** per collection: unsettled noted writes found by another field than `_id` */
  readonly #byFilter = new Map<string, number>()

  /** Whether a read has asked about this collection (its writes are indexed, its entries may exist). */
  watches (name: string): boolean { return this.#watched.has(name) }

  /**
   * Whether a write found by another field than `_id` is unsettled in this collection: it may
   * be applied after a later write by `_id` (two targets have no order) and then match that
   * document, so such a write is not patched into entries meanwhile (write-effects.ts).
   */
  filterWriteUnsettled (name: string): boolean { return (this.#byFilter.get(name) ?? 0) > 0 }

  /**
   * A write to a collection no read has asked about: listed, not indexed. Only a read needs the
   * index, so a collection that is only written (events, counters) costs a push and a count
   * per write, not a footprint and its keys.
   */
  defer (name: string, op: WriteOp): void {
    let u = this.#unindexed.get(name)
    if (u === undefined) this.#unindexed.set(name, u = { ops: [], head: 0, unsettled: 0 })
    u.ops.push(op)
    u.unsettled++
  }

  /**
   * A read asks about a collection, before it looks at anything: from now on its writes are
   * indexed as they are noted, and its listed unsettled ones are indexed now (their own
   * footprints: footprint.ts#footprintOf), so the read finds them. More than INDEX_AT_WATCH of
   * them would stall the event loop (indexing costs per write): those get no footprint, and every read of the
   * collection waits until they have all settled (the returned promise, after the queue is sent
   * at once), as a read the cache does not key waits for every unsettled write.
   */
  watch (name: string, sendNow: () => void): Promise<unknown> | undefined {
    if (this.#watched.has(name)) {
      const backlog = this.#backlogs.get(name)
      if (backlog !== undefined) sendNow() // each read waiting for it sends what is queued
      return backlog
    }
    this.#watched.add(name)
    const u = this.#unindexed.get(name)
    if (u === undefined) return undefined
    this.#unindexed.delete(name)
    const unsettled = u.ops.slice(u.head).filter(op => op.state !== SETTLED)
    if (unsettled.length <= INDEX_AT_WATCH) {
      for (const op of unsettled) this.add(name, op)
      return undefined
    }
    // one wait for them all, shared by the reads that come meanwhile (settle() resolves it)
    const backlog = this.settled(unsettled, sendNow).then(() => { this.#backlogs.delete(name) })
    this.#backlogs.set(name, backlog)
    return backlog
  }

  /** Notes a queued write (its footprint computed once, here, unless given). */
  add (name: string, op: WriteOp, fp: Footprint = safeFootprint(op), keys: readonly string[] = footprintKeys(fp)): void {
    const idKey = op.kind === INSERT ? fp.newIds[0] : op.body.collation === undefined ? fp.ids[0] : undefined
    const found = byFilter(fp)
    if (found) this.#byFilter.set(name, (this.#byFilter.get(name) ?? 0) + 1)
    this.#noted.set(op, { name, seq: this.seq++, fp, keys, idKey, settled: -1, byFilter: found })
    this.#index.list(name, op, keys)
  }

  /** Returns the id key of the write's document when no other write to it is unsettled any more. */
  settle (name: string, op: WriteOp): string | undefined {
    const n = this.#noted.get(op)
    let caughtUp: string | undefined
    if (n === undefined) {
      this.#settledUnindexed(name) // noted before a read asked about its collection
    } else if (n.settled === -1) {
      n.settled = this.#settles++
      if (n.byFilter) this.#byFilter.set(name, (this.#byFilter.get(name) as number) - 1)
      if (n.idKey !== undefined && !this.#touched(name, n.idKey)) caughtUp = n.idKey
      if (this.#reads.size === 0) this.#forget(op, n)
      else this.#kept.push(op)
    }
    const catchingUp = this.#catchingUp.get(op)
    if (catchingUp !== undefined) {
      this.#catchingUp.delete(op)
      for (const resolve of catchingUp) resolve()
    }
    return caughtUp
  }

  /** Every unsettled write of a collection (O(writes noted): for a read the cache does not key, which waits for them all). */
  all (name: string): readonly WriteOp[] {
    const out: WriteOp[] = []
    for (const [op, n] of this.#noted) if (n.name === name && n.settled === -1) out.push(op)
    return out
  }

  /** Whether a write known to touch the document of this id key is still unsettled. */
  #touched (name: string, idKey: string): boolean {
    const unsettled = (op: WriteOp): boolean => {
      const n = this.#noted.get(op) as Noted
      return n.settled === -1 && n.idKey === idKey
    }
    return this.#index.some(name, idIndexKey(idKey), unsettled) || this.#index.some(name, newIdIndexKey(idKey), unsettled)
  }

  /**
   * For a read by one `_id`, before it is sent: the unsettled writes that may change or create
   * that document, or touch any (the writes by another field are judged once its answer is
   * known: check()).
   */
  toDocument (name: string, filter: Filter): readonly WriteOp[] {
    const id = idKeyOf(filter)
    if (id === undefined) return NONE
    const out: WriteOp[] = []
    for (const op of this.#index.under(name, documentKeys(id))) if (this.#noted.get(op)?.settled === -1) out.push(op)
    return out
  }

  /** A read starts (or starts again): from now on, settled writes are kept for it. */
  begin (read: object): ReadMark {
    this.#reads.delete(read)
    this.#reads.set(read, this.#settles)
    return { startSeq: this.seq, settleMark: this.#settles }
  }

  /** A read is over: the writes kept only for it go. */
  end (read: object): void {
    this.#reads.delete(read)
    const oldest = this.#reads.size === 0 ? Infinity : this.#reads.values().next().value as number
    while (this.#head < this.#kept.length) {
      const op = this.#kept[this.#head] as WriteOp
      const n = this.#noted.get(op)
      if (n !== undefined && n.settled >= oldest) break
      if (n !== undefined) this.#forget(op, n)
      this.#head++
    }
    if (this.#head > 1024 && this.#head * 2 > this.#kept.length) {
      this.#kept = this.#kept.slice(this.#head)
      this.#head = 0
    }
  }

  /** The writes noted around a read (`mark`) that may change its answer `a`. */
  check (name: string, a: Answer, mark: ReadMark): ReadCheck {
    const out: ReadCheck = { missed: [], late: false, noted: false }
    const keys = answerKeys(a)
    if (a.found && !a.projected) docFieldKeys(a.doc(), (_, fieldKeys) => { keys.push(...fieldKeys) })
    // an answer that does not show its _id may be any document: every noted write is a candidate
    const candidates = a.found && a.idKey === undefined ? [...this.#noted.keys()].filter(op => this.#noted.get(op)?.name === name) : this.#index.under(name, keys)
    for (const op of candidates) {
      const n = this.#noted.get(op) as Noted
      if (n.seq < mark.startSeq && n.settled !== -1 && n.settled < mark.settleMark) continue // the answer shows it
      if (!affects(n.fp, a)) continue
      if (n.seq >= mark.startSeq) out.noted = true
      else if (n.settled === -1) out.missed.push(op)
      else out.late = true
    }
    return out
  }

  /** Resolves once every given write has settled; sends the queue at once. */
  settled (ops: readonly WriteOp[], sendNow: () => void): Promise<unknown> {
    if (ops.length === 0) return Promise.resolve()
    sendNow()
    return Promise.all(ops.map(op => new Promise<void>(resolve => {
      let list = this.#catchingUp.get(op)
      if (list === undefined) this.#catchingUp.set(op, list = [])
      list.push(resolve)
    })))
  }

  #settledUnindexed (name: string): void {
    const u = this.#unindexed.get(name)
    if (u === undefined || u.unsettled === 0) return
    if (--u.unsettled === 0) {
      u.ops.length = 0
      u.head = 0
      return
    }
    // writes settle mostly in queue order: drop the settled ones from the front; a write stuck
    // near the front (retrying) leaves the rest behind it until they are twice the unsettled
    const ops = u.ops
    while (u.head < ops.length && (ops[u.head] as WriteOp).state === SETTLED) u.head++
    if (u.head > 64 && u.head * 2 > ops.length) {
      u.ops = ops.slice(u.head)
      u.head = 0
    } else if (ops.length - u.head > 2 * u.unsettled + 64) {
      u.ops = ops.slice(u.head).filter(op => op.state !== SETTLED) // amortized O(1) per write
      u.head = 0
    }
  }

  #forget (op: WriteOp, n: Noted): void {
    this.#noted.delete(op)
    this.#index.unlist(n.name, op, n.keys)
  }
}
