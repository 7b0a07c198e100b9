import { describe, expect, it } from 'vitest'
import { apply, hold, pause } from './fake-db.js'
import { harness, useFakeClock } from './harness.js'
import type { BatchLimits, TakeMoment } from '../../src/buffer/batch.js'
import { coalesceChosen, select, selectFresh, type Selection, type Targets } from '../../src/buffer/select.js'
import { buildDelete, buildInsert, buildUpdate } from '../../src/write/build-op.js'
import type { WriteOp } from '../../src/write/write-op.js'

// The batch-selection rule (src/buffer/select.ts) on its own: plain writes, a list, the
// targets held and parked — no queue, no Db.

const NOW = 1_000_000
const AT: TakeMoment = { now: NOW, flushing: false }
const FLUSHING: TakeMoment = { now: NOW, flushing: true }
const LIMITS: BatchLimits = { maxCount: 1000, maxBytes: 16 * 1024 * 1024, coalesce: true }

function queued (op: WriteOp): WriteOp {
  op.enqueue()
  return op
}
const set = (id: unknown, fields: Record<string, unknown>): WriteOp => queued(buildUpdate(false, { _id: id }, { $set: fields }, undefined))
const unset = (id: unknown, field: string): WriteOp => queued(buildUpdate(false, { _id: id }, { $unset: { [field]: '' } }, undefined))
const insert = (id?: unknown): WriteOp => queued(buildInsert(id === undefined ? { x: 1 } : { _id: id }, undefined))
const del = (id: unknown): WriteOp => queued(buildDelete(false, { _id: id }, undefined))
/** a write of `id` out in a batch (in flight): it holds its target */
const out = (id: unknown): WriteOp => {
  const op = set(id, { out: true })
  op.send()
  return op
}

/** The queue's targets as plain maps: held (by a write out) and parked. */
class FakeTargets implements Targets {
  readonly held = new Map<string, WriteOp>()
  readonly chains = new Map<string, WriteOp[]>()
  readonly heads = new Set<WriteOp>()
  looked = 0
  /** `op` is out: it holds its target */
  with (op: WriteOp): this { this.held.set(op.target, op); return this }
  park (...ops: WriteOp[]): this {
    for (const op of ops) this.chains.set(op.target, [...(this.chains.get(op.target) ?? []), op])
    return this
  }

  holder = (target: string): WriteOp | undefined => { this.looked++; return this.held.get(target) }
  anyHeld = (): boolean => this.held.size > 0
  /** the plan applied: `op` was taken into the batch, it holds its target */
  hold = (target: string, op: WriteOp): void => { this.held.set(target, op) }
  isHead = (op: WriteOp): boolean => this.heads.has(op)
  parkedOf = (target: string): readonly WriteOp[] | undefined => this.chains.get(target)
}

function pick (ops: WriteOp[], targets: Targets = new FakeTargets(), limits: Partial<BatchLimits> = {}, at = AT, ordered = false): Selection {
  const items = Object.freeze([...ops]) // select() must not change the list
  const s = select({ items, head: 0 }, targets, { ...LIMITS, ...limits }, at, ordered)
  // the plan applied as CollectionQueue#apply does: the batch holds its targets, the coalesced writes join
  if (targets instanceof FakeTargets) for (const op of s.batch ?? []) targets.hold(op.target, op)
  coalesceChosen(s)
  return s
}

const sets = (op: WriteOp | undefined): unknown => (op?.body.update as { $set?: unknown } | undefined)?.$set

describe('the batch budget counts what a coalesced write carries', () => {
  it('a write carrying others, coalesced into a write of the batch, counts with what it carries: the batch stops within maxBytes (review, issue 43)', () => {
    const b = set(1, { b: 1 })
    const b2 = set(1, { c: 'x'.repeat(400) })
    pick([b, b2]) // b carries b2 now, as a lingering write that others joined
    expect(b.carried).toBeGreaterThan(400)
    const a = set(1, { a: 1 })
    const c = set(2, { z: 1 })
    const maxBytes = a.bytes + b.bytes + b.carried + c.bytes - 1
    const s = pick([a, b, c], new FakeTargets(), { maxBytes })
    expect(s.batch).toEqual([a]) // b joined a; c would pass the budget (before: counted without b's 400 bytes, it went too)
    expect(a.bytes + a.carried).toBeLessThanOrEqual(maxBytes)
  })
})

describe('select(): ordering', () => {
  it('a write of a target held by a write out is parked, never chosen; other targets go', () => {
    const a = set(1, { v: 1 })
    const b = set(2, { v: 1 })
    const s = pick([a, b], new FakeTargets().with(out(1)))
    expect(s.batch).toEqual([b])
    expect(s.parked).toEqual([a])
    expect(s.kept).toBeNull()
    expect(s.stop).toBe(2)
  })

  it('each write chosen holds its target from then on (held is how the queue keeps later writes back)', () => {
    const a = set(1, { v: 1 })
    const i = insert(2)
    const t = new FakeTargets()
    pick([a, i], t)
    expect([...t.held.values()]).toEqual([a])
  })

  it('a later write of a target chosen into this batch is never chosen with it (coalescing off: parked behind it)', () => {
    const a = set(1, { v: 1 })
    const b = set(1, { v: 2 })
    const s = pick([a, b], undefined, { coalesce: false })
    expect(s.batch).toEqual([a])
    expect(s.parked).toEqual([b])
    expect(s.coalesced).toBeNull()
  })

  it('a write kept (another command) keeps the later writes of its target behind it', () => {
    const a = set(1, { v: 1 })
    const d = del(2)
    const e = set(2, { v: 2 })
    const f = set(3, { v: 3 })
    const s = pick([a, d, e, f])
    expect(s.batch).toEqual([a, f])
    expect(s.kept).toEqual([d, e]) // e could go with the updates, but not before d
  })

  it('a write whose parked writes are still there does not let a later write of its target coalesce past them', () => {
    const head = set(1, { a: 1 })
    const parked = unset(1, 'a') // cannot coalesce into head: same path under two operators
    const later = set(1, { b: 1 })
    const s = pick([head, later], new FakeTargets().park(parked))
    expect(s.batch).toEqual([head])
    expect(s.coalesced).toBeNull()
    expect(s.parked).toEqual([later]) // behind `parked`, which is still parked
  })

  it('a write kept behind a lingering write of its target stays behind it even when its target is held', () => {
    const l = set(1, { v: 'L' })
    l.linger(NOW + 100)
    const y = set(1, { v: 'Y' })
    const s = pick([l, y], new FakeTargets().with(out(1)), { coalesce: false })
    expect(s.kept).toEqual([l, y]) // parked, y would go back to the list's head when the holder returns: before l
    expect(s.parked).toBeNull()
  })

  it('end to end: a later write of a document is not applied before a lingering one while an earlier write is out', async () => {
    const { fake, c } = harness({ coalesce: false, maxBatchSize: 2, maxInFlight: 4 })
    fake.fallback = hold
    const x = c.updateOne({ _id: 1 }, { $set: { v: 'x' } }, { upsert: true })
    await pause(0)
    expect(fake.held).toHaveLength(1) // x is out
    const l = c.updateOne({ _id: 1 }, { $set: { v: 'L' } }, { lingerMs: 100 })
    const y = c.updateOne({ _id: 1 }, { $set: { v: 'Y' } })
    const full = [c.insertOne({ _id: 2 }), c.insertOne({ _id: 3 })] // a full batch: a take while x is out
    await pause(20)
    fake.fallback = apply
    for (const call of fake.held) call.answer()
    await Promise.all([x, l, y, ...full])
    expect(fake.doc('c', 1)?.v).toBe('Y')
  })
})

describe('select(): coalescing', () => {
  it('a later same-target updateOne is folded into the chosen one; the batch carries the merged update', () => {
    const a = set(1, { v: 1 })
    const b = set(1, { w: 2 })
    const s = pick([a, b])
    expect(s.batch).toEqual([a])
    expect(s.coalesced).toEqual([b])
    expect(sets(a)).toEqual({ v: 1, w: 2 })
    expect(b.merged).toBe(true)
  })

  it('select() itself changes no write: the plan carries the merged update, applying it puts it in place', () => {
    const a = set(1, { v: 1 })
    const b = set(1, { w: 2 })
    const t = new FakeTargets()
    const s = select({ items: [a, b], head: 0 }, t, LIMITS, AT, false)
    expect(s.coalesced).toEqual([b])
    expect(s.into).toEqual([a])
    expect((s.updates?.[0] as { $set?: unknown }).$set).toEqual({ v: 1, w: 2 })
    expect(sets(a)).toEqual({ v: 1 })
    expect(b.merged).toBe(false)
    expect(t.held.size).toBe(0)
    coalesceChosen(s)
    expect(sets(a)).toEqual({ v: 1, w: 2 })
    expect(b.merged).toBe(true)
  })

  it('writes parked behind the chosen write coalesce into it, in order, until one cannot', () => {
    const head = set(1, { a: 1 })
    const p1 = set(1, { b: 1 })
    const p2 = unset(1, 'a')
    const p3 = set(1, { c: 1 })
    const s = pick([head], new FakeTargets().park(p1, p2, p3))
    expect(s.batch).toEqual([head])
    expect(s.coalesced).toEqual([p1])
    expect(sets(head)).toEqual({ a: 1, b: 1 })
  })

  it('once its parked writes are all drawn in, a later list write of the target coalesces too', () => {
    const head = set(1, { a: 1 })
    const p1 = set(1, { b: 1 })
    const later = set(1, { c: 1 })
    const s = pick([head, later], new FakeTargets().park(p1))
    expect(s.coalesced).toEqual([p1, later])
    expect(sets(head)).toEqual({ a: 1, b: 1, c: 1 })
  })

  it('a write whose holder is out (not in this batch) is parked, not coalesced', () => {
    const b = set(1, { w: 2 })
    const s = pick([b], new FakeTargets().with(out(1)))
    expect(s.batch).toBeNull()
    expect(s.parked).toEqual([b])
  })

  it('coalesced bytes count against maxBytes: the batch stops sooner', () => {
    const a = set(1, { v: 1 })
    const b = set(1, { w: 2 })
    const c = set(2, { v: 3 })
    const s = pick([a, b, c], undefined, { maxBytes: a.bytes + b.bytes + c.bytes - 1 })
    expect(s.batch).toEqual([a])
    expect(s.coalesced).toEqual([b])
    expect(s.stop).toBe(2) // c waits for the next batch
  })

  it('a parked write that would overflow the batch stays parked', () => {
    const head = set(1, { a: 1 })
    const p = set(1, { b: 1 })
    const s = pick([head], new FakeTargets().park(p), { maxBytes: head.bytes + p.bytes - 1 })
    expect(s.batch).toEqual([head])
    expect(s.coalesced).toBeNull()
  })
})

describe('select(): one write command per batch', () => {
  it('takes the first command met and keeps the others in order; inserts, updates and deletes never mix', () => {
    const i1 = insert(1)
    const u = set(2, { v: 1 })
    const i2 = insert(3)
    const d = del(4)
    const i3 = insert(5)
    const s = pick([i1, u, i2, d, i3])
    expect(s.batch).toEqual([i1, i2, i3])
    expect(s.kept).toEqual([u, d])
    expect(s.stop).toBe(5)
  })

  it('updateMany travels apart from updateOne', () => {
    const one = set(1, { v: 1 })
    const many = queued(buildUpdate(true, { k: 1 }, { $set: { v: 1 } }, undefined))
    const s = pick([one, many])
    expect(s.batch).toEqual([one])
    expect(s.kept).toEqual([many])
  })
})

describe('select(): limits', () => {
  it('maxCount: stops there; the rest is not walked', () => {
    const ops = [1, 2, 3, 4].map(i => set(i, { v: i }))
    const t = new FakeTargets().with(set(99, { v: 99 })) // a target held elsewhere: each write walked asks for its holder
    const s = pick(ops, t, { maxCount: 2 })
    expect(s.batch).toEqual(ops.slice(0, 2))
    expect(s.stop).toBe(2)
    expect(t.looked).toBe(2)
  })

  it('nothing held anywhere: no holder is looked up (the common take of distinct targets)', () => {
    const ops = [1, 2, 3].map(i => set(i, { v: i }))
    const t = new FakeTargets()
    expect(pick(ops, t).batch).toEqual(ops)
    expect(t.looked).toBe(0)
  })

  it('maxBytes: stops before the write that would overflow; the first write goes whatever its size', () => {
    const ops = [1, 2, 3].map(i => set(i, { v: i }))
    const per = (ops[0] as WriteOp).bytes
    expect(pick(ops, undefined, { maxBytes: 2 * per }).batch).toEqual(ops.slice(0, 2))
    expect(pick(ops, undefined, { maxBytes: 1 }).batch).toEqual(ops.slice(0, 1))
  })

  it('the fast path (fresh inserts) honours the same limits', () => {
    const ops = [insert(), insert(), insert()]
    const s = selectFresh({ items: ops, head: 0 }, { ...LIMITS, maxCount: 2 }, NOW)
    expect(s.batch).toEqual(ops.slice(0, 2))
    expect(s.stop).toBe(2)
    const b = selectFresh({ items: ops, head: 1 }, { ...LIMITS, maxBytes: 1 }, NOW)
    expect(b.batch).toEqual([ops[1]])
  })

  it('the fast path skips writes that left (settled, past their deadline): the batch holds the live ones, in order, counted alone', () => {
    const ops = [insert(), insert(), insert(), insert(), insert(), insert()]
    ;(ops[1] as WriteOp).settle() // aborted while queued: still in the list, skipped by state
    ;(ops[3] as WriteOp).timeOutAt(NOW)
    const s = selectFresh({ items: ops, head: 0 }, { ...LIMITS, maxCount: 3 }, NOW)
    expect(s.batch).toEqual([ops[0], ops[2], ops[4]])
    expect(s.batch).toHaveLength(3)
    expect(s.expired).toEqual([ops[3]])
    expect(s.stop).toBe(5)
  })
})

describe('select(): lingering writes', () => {
  it('a lingering write is kept until its linger ends, with the later writes of its target; its end is reported', () => {
    const l = set(1, { v: 1 })
    l.linger(NOW + 50)
    const m = set(2, { v: 1 })
    m.linger(NOW + 20)
    const later = set(1, { v: 2 })
    const other = set(3, { v: 3 })
    const s = pick([l, m, later, other])
    expect(s.batch).toEqual([other])
    expect(s.kept).toEqual([l, m, later])
    expect(s.lingerEnd).toBe(NOW + 20)
    expect(s.lingerOver).toBeNull()
  })

  it('goes when flushing, or once its linger ended (then listed in lingerOver: no later write joins it)', () => {
    const l = set(1, { v: 1 })
    l.linger(NOW + 50)
    expect(pick([l], undefined, {}, FLUSHING)).toMatchObject({ batch: [l], lingerOver: [l], lingerEnd: 0 })
    expect(pick([l], undefined, {}, { now: NOW + 50, flushing: false })).toMatchObject({ batch: [l], lingerOver: [l] })
  })
})

describe('select(): ordered queues', () => {
  it('a run of one command from the head, stopping at the first other command; one target may appear twice', () => {
    const a = set(1, { v: 1 })
    const b = set(1, { v: 2 })
    const i = insert(2)
    const c = set(3, { v: 3 })
    const s = pick([a, b, i, c], undefined, { coalesce: false }, AT, true)
    expect(s.batch).toEqual([a, b])
    expect(s.kept).toBeNull()
    expect(s.stop).toBe(2)
  })

  it('stops at a lingering write (nothing overtakes it)', () => {
    const a = set(1, { v: 1 })
    const l = set(2, { v: 1 })
    l.linger(NOW + 10)
    const b = set(3, { v: 1 })
    const s = pick([a, l, b], undefined, {}, AT, true)
    expect(s.batch).toEqual([a])
    expect(s.stop).toBe(1)
    expect(s.lingerEnd).toBe(NOW + 10)
  })
})

describe('select(): writes that left', () => {
  it('past their deadline: listed in expired, not chosen, and they do not count against the limits', () => {
    const gone = set(1, { v: 1 })
    gone.timeOutAt(NOW)
    const a = set(2, { v: 1 })
    const s = pick([gone, a], undefined, { maxCount: 1 })
    expect(s.expired).toEqual([gone])
    expect(s.batch).toEqual([a])
    const fresh = insert()
    fresh.timeOutAt(NOW - 1)
    expect(selectFresh({ items: [fresh], head: 0 }, LIMITS, NOW)).toMatchObject({ batch: null, expired: [fresh], stop: 1 })
  })

  it('a head of parked writes past its deadline: the later writes of its target wait for those parked writes', () => {
    const head = set(1, { v: 'A' })
    head.timeOutAt(NOW)
    const parked = set(1, { v: 'B' })
    const later = set(1, { v: 'C' })
    const t = new FakeTargets().park(parked)
    t.heads.add(head)
    const s = pick([head, later], t)
    expect(s.expired).toEqual([head])
    expect(s.batch).toBeNull()
    expect(s.kept).toEqual([later]) // parked goes back to the list's head first, then later
  })

  it('end to end: a write released from parking that expires in a take lets the writes parked behind it go before a later one', async () => {
    const clock = useFakeClock()
    const turn = async (n = 1): Promise<void> => { for (let i = 0; i < n; i++) await new Promise<void>(resolve => setImmediate(resolve)) }
    const { fake, c } = harness({ coalesce: false, maxBatchSize: 2, maxInFlight: 4 })
    fake.fallback = hold
    let late: Promise<unknown> | undefined
    // x's caller writes C as soon as x resolves: before the pump that takes what x released
    const x = c.updateOne({ _id: 1 }, { $set: { v: 'x' } }, { upsert: true }).then(() => { late = c.updateOne({ _id: 1 }, { $set: { v: 'C' } }) })
    await turn()
    expect(fake.held).toHaveLength(1) // x is out
    const a = c.updateOne({ _id: 1 }, { $set: { v: 'A' } }, { timeoutMs: 1000 }).catch((err: unknown) => err)
    const b = c.updateOne({ _id: 1 }, { $set: { v: 'B' } })
    const full = [c.insertOne({ _id: 2 }), c.insertOne({ _id: 3 })] // a full batch: a take while x is out parks a and b
    await turn()
    clock.block(2000) // a's deadline is past; the sweep has not run
    fake.fallback = apply
    fake.held[0]?.answer() // x returns: a goes back to the list's head, expires in the next take
    await turn(20)
    for (const call of fake.held) call.answer()
    await turn(20)
    await Promise.all([x, a, b, late, ...full])
    expect(fake.doc('c', 1)?.v).toBe('C')
  })

  it('no longer queued (aborted, settled): skipped silently, also among parked writes drawn into a holder', () => {
    const aborted = set(1, { v: 1 })
    aborted.settle()
    const head = set(2, { a: 1 })
    const gone = set(2, { b: 1 })
    gone.settle()
    const p = set(2, { c: 1 })
    const s = pick([aborted, head], new FakeTargets().park(gone, p))
    expect(s.batch).toEqual([head])
    expect(s.coalesced).toEqual([p])
    expect(s.expired).toBeNull()
  })

  it('the list window starts at head: the spent slots before it are never read', () => {
    const spent = set(1, { v: 1 })
    const a = set(2, { v: 1 })
    const s = select({ items: [spent, a], head: 1 }, new FakeTargets(), LIMITS, AT, false)
    expect(s.batch).toEqual([a])
  })
})
