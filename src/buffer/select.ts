import type { Document } from 'mongodb'
import { mayCoalesce, mergedUpdate } from '../write/coalesce.js'
import { COMMAND_OF, QUEUED, type WriteOp } from '../write/write-op.js'
import type { BatchLimits, TakeMoment } from './batch.js'

/**
 * Which queued writes go together in the next batch: the rule, as a function of what it reads.
 * It changes nothing — no count, no list, no target, no write: it returns a plan, the
 * `Selection`, and the CollectionQueue applies it (holds the targets of the batch's writes,
 * coalesces, parks, puts back, dequeues). Within one pass it sees what it chose as if applied:
 * a target taken by a write of this batch is held, and a write coalesced into carries the
 * merged update (`mergedUpdate`, from the update it carries so far in this pass).
 *
 * The rule (unordered queue), write by write from the head of the list:
 * - not queued any more (aborted, settled): skipped; past its deadline: `expired` (when writes
 *   were parked behind it, the later writes of its target in this pass are `kept`: those go first);
 * - the batch is full (count, bytes): stop;
 * - lingering (per-write `lingerMs`) and not flushing: `kept`, and so are the later writes of
 *   its target in this pass, held or not (nothing may go before it);
 * - its target is held (a write out, fenced, or chosen into this batch): coalesced into the
 *   write of this batch holding it when it may (`mayCoalesce`, the one rule, and the updates
 *   merge), else `parked` behind the holder;
 * - another write command than the batch's: `kept`;
 * - else it joins the batch and holds its target; the writes parked behind that target may
 *   coalesce into it now, in order, until one cannot.
 * An ordered queue takes a run of one command from the head, and stops at a lingering write.
 */

/** The queue's list: its writes in order from `head` (an OpList). Read only. */
export interface ListWindow {
  readonly items: readonly WriteOp[]
  readonly head: number
}

/** The queue's targets as select() sees them: held and parked writes. */
export interface Targets {
  /** the write holding `target` — taken (still queued until sent), out (in flight or backing off), or fenced — if any */
  holder: (target: string) => WriteOp | undefined
  /** whether any target is held (none: select() asks `holder` nothing) */
  anyHeld: () => boolean
  /** the writes parked behind `target`'s holder, oldest first, if any */
  parkedOf: (target: string) => readonly WriteOp[] | undefined
  /** whether `op` is the *head* of parked writes: released back to the list, they wait for it */
  isHead: (op: WriteOp) => boolean
}

/** What was chosen: the plan the queue applies. Arrays are null when empty; every write listed leaves the list. */
export interface Selection {
  /** the batch, in queue order; null: nothing can go now */
  batch: WriteOp[] | null
  /** the targets the batch's writes take (hold), each by its write; null with the batch, or on the fast path (fresh inserts hold nothing) */
  taken: Map<string, WriteOp> | null
  /** writes coalesced into a write of the batch (from the list, or parked behind its target), in the order they join */
  coalesced: WriteOp[] | null
  /** for each of `coalesced`, the write it joins (`into[i]` takes `coalesced[i]`) */
  into: WriteOp[] | null
  /** for each of `coalesced`, the update `into[i]` carries once it joined (WriteOp#coalesce) */
  updates: Document[] | null
  /** writes to park behind the holder of their target, in order */
  parked: WriteOp[] | null
  /** writes skipped, in order: they go back to the list just before `stop` */
  kept: WriteOp[] | null
  /** writes past their deadline */
  expired: WriteOp[] | null
  /** writes reached after their linger ended: no later write joins them as it is pushed */
  lingerOver: WriteOp[] | null
  /** the walk stopped before `items[stop]`: the list resumes at `stop - kept.length` */
  stop: number
  /** clock time when the earliest linger among the kept writes ends; 0 = none */
  lingerEnd: number
}

/** A queued write past its deadline. */
export function expiredAt (op: WriteOp, now: number): boolean {
  return op.deadline > 0 && op.deadline <= now
}

function selection (stop: number): Selection {
  return { batch: null, taken: null, coalesced: null, into: null, updates: null, parked: null, kept: null, expired: null, lingerOver: null, stop, lingerEnd: 0 }
}

/**
 * The fast path, while the list holds only fresh inserts (no two can share a target, none can
 * be held): the writes from the head, up to the limits. Their targets are never computed.
 */
export function selectFresh (list: ListWindow, limits: BatchLimits, now: number): Selection {
  const { items, head } = list
  const end = items.length
  const out = selection(end)
  let count = 0
  let bytes = 0
  let skipped = false
  let i = head
  for (; i < end; i++) {
    const op = items[i] as WriteOp
    if (op.state !== QUEUED) { skipped = true; continue }
    if (expiredAt(op, now)) { (out.expired ??= []).push(op); skipped = true; continue }
    if (count > 0 && (count >= limits.maxCount || bytes + op.bytes > limits.maxBytes)) break
    count++
    bytes += op.bytes
  }
  // the batch in one array of its exact length (an array grown by push from empty holds 17 slots)
  if (count > 0) out.batch = skipped ? chosen(items, head, i, count, now) : items.slice(head, i)
  out.stop = i
  return out
}

/** The queued, unexpired writes of items[from, to): `count` of them (selectFresh's second pass, when it skipped some). */
function chosen (items: readonly WriteOp[], from: number, to: number, count: number, now: number): WriteOp[] {
  const batch = new Array<WriteOp>(count)
  let n = 0
  for (let i = from; i < to; i++) {
    const op = items[i] as WriteOp
    if (op.state === QUEUED && !expiredAt(op, now)) batch[n++] = op
  }
  return batch
}

/** Puts the selection's coalescing in place: each of `coalesced` joins its `into` write, which carries the merged update from then on. */
export function coalesceChosen (sel: Selection): void {
  const { coalesced } = sel
  if (coalesced === null) return
  const into = sel.into as WriteOp[]
  const updates = sel.updates as Document[]
  for (let i = 0; i < coalesced.length; i++) (into[i] as WriteOp).coalesce(coalesced[i] as WriteOp, updates[i] as Document)
}

/** `next` joins `leader` in the plan, carrying `update` from now on. */
function join (out: Selection, leader: WriteOp, next: WriteOp, update: Document): void {
  ;(out.coalesced ??= []).push(next)
  ;(out.into ??= []).push(leader)
  ;(out.updates ??= []).push(update)
}

/** The next batch of a queue (the rule: see the header). */
export function select (list: ListWindow, targets: Targets, limits: BatchLimits, at: TakeMoment, ordered: boolean, spare: Map<string, WriteOp> | null = null): Selection {
  const { items } = list
  const { maxCount, maxBytes, coalesce } = limits
  const { now, flushing } = at
  const end = items.length
  const out = selection(end)
  let batch = null as WriteOp[] | null
  let command = -1
  let bytes = 0
  /** targets taken by a write of this batch (the plan's `taken`): held for the rest of this pass */
  let taken = null as Map<string, WriteOp> | null
  const anyHeld = targets.anyHeld()
  /** the update each write of this batch carries once the writes coalesced into it so far join it */
  let carrying = null as Map<WriteOp, Document> | null
  /** targets with a write kept in this pass, or with parked writes freed by an expired head: their later writes stay in the list */
  let blocked = null as Set<string> | null
  /** targets whose parked writes changed in this pass: true = some are parked, false = none left */
  let parkedNow = null as Map<string, boolean> | null
  let i = list.head
  for (; i < end; i++) {
    const op = items[i] as WriteOp
    if (op.state !== QUEUED) continue
    if (expiredAt(op, now)) {
      ;(out.expired ??= []).push(op)
      // the writes parked behind it go back to the list's head once it is dequeued: nothing of its target before them
      if (!ordered && targets.isHead(op)) (blocked ??= new Set()).add(op.target)
      continue
    }
    // a write's size with what is coalesced into it (a lingering write carries the writes that joined it)
    if (batch !== null && (batch.length >= maxCount || bytes + op.bytes + op.carried > maxBytes)) break
    if (op.lingerUntil > 0) {
      if (op.lingerUntil > now && !flushing) {
        // it waits for company of its own target: the linger timer wakes the pump at its end
        if (out.lingerEnd === 0 || op.lingerUntil < out.lingerEnd) out.lingerEnd = op.lingerUntil
        if (ordered) break
        ;(out.kept ??= []).push(op)
        ;(blocked ??= new Set()).add(op.target)
        continue
      }
      ;(out.lingerOver ??= []).push(op)
    }
    const target = op.target
    const c = COMMAND_OF[op.kind] as number
    if (ordered) {
      // strict submission order: a run of one command from the head
      if (command !== -1 && c !== command) break
    } else {
      if (blocked?.has(target) === true) {
        // an earlier write of its target stays in the list: so does it, held or not (parked,
        // it would go back to the list's head when its holder returns: before that write)
        ;(out.kept ??= []).push(op)
        continue
      }
      const holder = taken?.get(target) ?? (anyHeld ? targets.holder(target) : undefined)
      if (holder !== undefined) {
        // coalesced into the write of this batch holding its target, unless writes parked there go first
        if (coalesce && !(parkedNow?.get(target) ?? targets.parkedOf(target) !== undefined) && mayCoalesce(holder, op, maxBytes - bytes)) {
          const update = mergedUpdate(holder, carrying?.get(holder) ?? null, op)
          if (update !== null) {
            join(out, holder, op, update)
            ;(carrying ??= new Map()).set(holder, update)
            bytes += op.bytes + op.carried // the coalesced update grows by it and what it carries: it counts against the batch budget
            continue
          }
        }
        ;(out.parked ??= []).push(op) // it cannot go before its holder returns
        ;(parkedNow ??= new Map()).set(target, true)
        continue
      }
      if (command !== -1 && c !== command) {
        ;(out.kept ??= []).push(op)
        ;(blocked ??= new Set()).add(target)
        continue
      }
    }
    command = c
    ;(taken ??= spare ?? new Map()).set(target, op)
    ;(batch ??= []).push(op)
    bytes += op.bytes + op.carried
    // writes of its target parked behind an earlier holder may coalesce into it now
    const chain = ordered ? undefined : targets.parkedOf(target)
    if (chain !== undefined) {
      let left = false
      let carried = null as Document | null
      for (let k = 0; !left && k < chain.length; k++) {
        const next = chain[k] as WriteOp
        if (next.state !== QUEUED) continue // aborted, expired or settled while parked
        const update = coalesce && mayCoalesce(op, next, maxBytes - bytes) ? mergedUpdate(op, carried, next) : null
        if (update === null) left = true
        else {
          join(out, op, next, update)
          carried = update
          bytes += next.bytes + next.carried
        }
      }
      if (carried !== null) (carrying ??= new Map()).set(op, carried)
      ;(parkedNow ??= new Map()).set(target, left) // later writes of its target coalesce into it only if none is left
    }
  }
  out.batch = batch
  out.taken = taken
  out.stop = i
  return out
}
