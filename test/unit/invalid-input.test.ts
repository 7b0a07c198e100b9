import { describe, expect, it } from 'vitest'
import type { Document } from 'mongodb'
import { ErrorCodes, InvalidWriteError } from '../../src/index.js'
import { buildInsert } from '../../src/write/build-op.js'
import { settle } from './fake-db.js'
import { harness, type Coll } from './harness.js'

/** The handle without argument types: these tests pass what the types forbid. */
type Loose = Record<Exclude<keyof Coll, 'collectionName'>, (...args: unknown[]) => Promise<unknown>>

const circular: Document = { a: 1 }
circular.self = circular
const fn = (): number => 1
/** a filter DTO as TypeScript's class fields compile it: every declared field is own, set or not */
class OwnerFilter { owner: unknown; constructor (owner: unknown) { this.owner = owner } }
class Wrapper { v: unknown; constructor (v: unknown) { this.v = v } }
class GetterOnly { readonly #o: string; constructor (o: string) { this.#o = o } get owner (): string { return this.#o } }
class PrivateOnly { readonly #o: string; constructor (o: string) { this.#o = o } is (o: string): boolean { return o === this.#o } }
/** a method passed where its result was meant: `user.id` for `user.id()` */
const user = { name: 'ann', id (): string { return this.name } }

// [description, call, what the message must name]
const bad: Array<[string, (c: Loose) => Promise<unknown>, RegExp]> = [
  ['insertOne(null)', c => c.insertOne(null), /document must be a plain object, got null/],
  ['insertOne(array)', c => c.insertOne([1, 2]), /document must be a plain object, got an array of length 2/],
  ['insertOne(string)', c => c.insertOne('doc'), /document must be a plain object, got "doc"/],
  ['insertOne with a $-key', c => c.insertOne({ $set: { a: 1 } }), /must not contain \$-prefixed top-level keys, got "\$set"/],
  ['insertOne of a circular document', c => c.insertOne(circular), /cannot be serialized to BSON \(.*cyclic.*\): Object \{a, self/],
  ['updateOne with a string filter', c => c.updateOne('x', { $set: { a: 1 } }), /filter must be a plain object, got "x"/],
  ['updateOne without operators', c => c.updateOne({ _id: 1 }, { a: 1 }), /only update operators.*got Object \{a\}/],
  ['updateOne with $set: 5', c => c.updateOne({ _id: 1 }, { $set: 5 }), /update operator \$set needs an object, got 5/],
  ['updateOne with an empty pipeline', c => c.updateOne({ _id: 1 }, []), /update pipeline must not be empty/],
  ['updateOne with a bad pipeline stage', c => c.updateOne({ _id: 1 }, [{ a: 1 }]), /pipeline stage must be an object of \$-operators, got Object \{a\}/],
  ['updateOne with upsert: "yes"', c => c.updateOne({ _id: 1 }, { $set: { a: 1 } }, { upsert: 'yes' }), /upsert must be a boolean, got "yes"/],
  ['a negative timeoutMs', c => c.insertOne({ a: 1 }, { timeoutMs: -5 }), /timeoutMs must be a positive number up to 86400000 \(a day\), got -5/],
  ['a NaN timeoutMs', c => c.deleteOne({ _id: 1 }, { timeoutMs: NaN }), /timeoutMs must be a positive number up to 86400000 \(a day\), got NaN/],
  ['a signal that is not an AbortSignal', c => c.insertOne({ a: 1 }, { signal: {} }), /signal must be an AbortSignal, got Object \{\}/],
  ['options that are not an object', c => c.insertOne({ a: 1 }, 'fast'), /options must be an object, got "fast"/],
  ['replaceOne with a $-key', c => c.replaceOne({ _id: 1 }, { $set: { a: 1 } }), /replacement must not contain \$-prefixed top-level keys/],
  ['replaceOne(filter, null)', c => c.replaceOne({ _id: 1 }, null), /replacement must be a plain object, got null/],
  ['deleteOne(undefined)', c => c.deleteOne(undefined), /filter must be a plain object, got undefined/],
  ['deleteMany with a Date filter', c => c.deleteMany(new Date(0)), /filter must be a plain object, got Date \{\}/],
  ['an oversized document', c => c.insertOne({ big: 'x'.repeat(16 * 1024 * 1024) }), /over the 16 MiB BSON document limit/],
  // objects BSON would send as something else than the fields the buffer reads
  ['insertOne(Map)', c => c.insertOne(new Map([['_id', 1]])), /document must be a plain object, got Map/],
  ['replaceOne with a Map replacement', c => c.replaceOne({ _id: 1 }, new Map([['$set', { a: 1 }]])), /replacement must be a plain object, got Map/],
  ['deleteMany with a RegExp filter', c => c.deleteMany(/x/), /filter must be a plain object, got RegExp/],
  ['deleteMany with a boxed number filter (sent as {}: every document)', c => c.deleteMany(Object(1)), /filter must be a plain object, got Number/],
  ['deleteOne with a Promise filter', c => c.deleteOne(Promise.resolve({ _id: 1 })), /filter must be a plain object, got Promise/],
  ['insertOne of an object with toBSON', c => c.insertOne({ a: 1, toBSON: () => 5 }), /document must be a plain object, got Object \{a, toBSON\}/],
  ['a signal without removeEventListener', c => c.insertOne({ a: 1 }, { signal: { addEventListener: () => {}, aborted: false } }), /signal must be an AbortSignal/],
  ['a signal whose aborted getter throws', c => c.insertOne({ a: 1 }, { signal: { addEventListener: () => {}, removeEventListener: () => {}, get aborted () { throw new Error('boom') } } }), /invalid write: boom/],
  ['a frozen document without _id', c => c.insertOne(Object.freeze({ a: 1 })), /invalid write: .*_id/],
  ['a Proxy whose traps throw', c => c.insertOne(new Proxy({}, { ownKeys () { throw new Error('trap') }, get () { throw new Error('trap') } })), /invalid write: trap|an unreadable value/],
  ['a document nested 185 levels deep (the server refuses a command past 200)', c => c.insertOne(nested(185)), /nested too deeply/],
  ['a BigInt outside int64 (js-bson would store it wrapped)', c => c.insertOne({ n: 2n ** 70n }), /outside the int64 range/],
  // values BSON would not send as written: a filter losing a field selects documents it does not name
  ['a function as a filter value (sent as {}: every document)', c => c.updateMany({ owner: user.id }, { $set: { a: 1 } }), /"owner" is a function, which BSON does not send/],
  ['a Symbol as a filter value', c => c.deleteMany({ owner: Symbol.for('ann') }), /"owner" is a Symbol/],
  ['a function in $in', c => c.deleteMany({ owner: { $in: ['bob', fn] } }), /"owner\.\$in\.1" is a function/],
  ['a function in $nin (sent as $nin: []: every document)', c => c.deleteMany({ owner: { $nin: [fn] } }), /"owner\.\$nin\.0" is a function/],
  ['a Symbol inside $and', c => c.deleteOne({ $and: [{ a: 1 }, { owner: Symbol('x') }] }), /"\$and\.1\.owner" is a Symbol/],
  ['a function as $where (sent as {})', c => c.deleteMany({ $where: fn }), /"\$where" is a function/],
  ['a function in a Map in a filter', c => c.deleteOne({ a: new Map([['b', fn]]) }), /"a\.b" is a function/],
  ['undefined as a filter value (left out with ignoreUndefined: every document)', c => c.deleteMany({ owner: undefined }), /"owner" is undefined: sent as null .* ignoreUndefined/],
  ['undefined nested in a filter', c => c.updateOne({ a: { $elemMatch: { b: undefined } } }, { $set: { a: 1 } }), /"a\.\$elemMatch\.b" is undefined/],
  ['a function in arrayFilters', c => c.updateOne({ _id: 1 }, { $set: { 'a.$[e].v': 1 } }, { arrayFilters: [{ 'e.k': fn }] }), /"0\.e\.k" is a function/],
  ['a Symbol _id (the server would store another _id)', c => c.insertOne({ _id: Symbol('id') }), /_id cannot be Symbol\(id\): BSON does not send it/],
  ['a function _id', c => c.insertOne({ _id: fn }), /_id cannot be a function/],
  ['an invalid Date _id (stored as 1970-01-01)', c => c.insertOne({ _id: new Date(NaN) }), /_id: an invalid Date .* 1970-01-01/],
  ['an invalid Date in a document', c => c.insertOne({ a: [{ at: new Date('not a date') }] }), /a\.0\.at: an invalid Date/],
  ['an invalid Date in a Map in a document', c => c.insertOne({ m: new Map([['at', new Date(NaN)]]) }), /m\.at: an invalid Date/],
  ['an invalid Date in $set', c => c.updateOne({ _id: 1 }, { $set: { at: new Date(NaN) } }), /\$set\.at: an invalid Date/],
  ['an invalid Date in $max', c => c.updateOne({ _id: 1 }, { $max: { at: new Date(NaN) } }), /\$max\.at: an invalid Date/],
  ['an invalid Date in a replacement', c => c.replaceOne({ _id: 1 }, { at: new Date(NaN) }), /at: an invalid Date/],
  ['an invalid Date in a filter', c => c.deleteMany({ at: { $lt: new Date(NaN) } }), /at\.\$lt: an invalid Date/],
  // in an update, BSON leaving a function or a Symbol out changes what the update does
  ['a function in a $pull condition (sent as {}: pulls every element)', c => c.updateOne({ _id: 1 }, { $pull: { items: { owner: user.id } } }), /"\$pull\.items\.owner" is a function, which BSON does not send/],
  ['a function as a $set value (sent as nothing: the update does nothing)', c => c.updateOne({ _id: 1 }, { $set: { a: fn } }), /"\$set\.a" is a function/],
  ['a Symbol as a $push value', c => c.updateMany({}, { $push: { tags: Symbol('t') } }), /"\$push\.tags" is a Symbol/],
  ['a function in a pipeline update', c => c.updateOne({ _id: 1 }, [{ $set: { a: fn } }]), /"0\.\$set\.a" is a function/],
  // a class instance is sent as its own fields, and checked as any value is
  ['a class instance as a filter with an undefined field (a DTO: left out with ignoreUndefined, every document)', c => c.deleteMany(new OwnerFilter(undefined)), /"owner" is undefined/],
  ['a class instance as a filter with a function field (a method passed: sent as {}, every document)', c => c.deleteMany(new OwnerFilter(user.id)), /"owner" is a function/],
  ['a class instance with a function field inside $and', c => c.deleteMany({ $and: [new OwnerFilter(fn)] }), /"\$and\.0\.owner" is a function/],
  ['a class instance whose data is in getters, as a filter (sent as {}: every document)', c => c.deleteMany(new GetterOnly('ann')), /the filter is a GetterOnly instance with no own fields/],
  ['a class instance whose data is in #private fields, as a filter value', c => c.deleteMany({ owner: new PrivateOnly('ann') }), /"owner" is a PrivateOnly instance with no own fields/],
  ['a getter-only instance as a $pull condition (sent as {}: pulls every element)', c => c.updateOne({ _id: 1 }, { $pull: { items: new GetterOnly('ann') } }), /"\$pull\.items" is a GetterOnly instance/],
  ['a BigInt outside int64 inside a class instance', c => c.updateOne({ _id: 1 }, { $set: { w: new Wrapper(2n ** 64n + 5n) } }), /outside the int64 range/],
  ['a class instance nested 185 levels deep', c => c.insertOne({ w: new Wrapper(nested(185)) }), /nested too deeply/],
]

function nested (levels: number): Document {
  let doc: Document = { leaf: 1 }
  for (let i = 0; i < levels; i++) doc = { d: doc }
  return doc
}

describe('invalid writes', () => {
  it.each(bad)('%s is rejected with InvalidWriteError naming the bad value', async (_name, call, message) => {
    const { fake, wb, c } = harness()
    const s = await settle(call(c as unknown as Loose))
    expect(s.status).toBe('rejected')
    if (s.status !== 'rejected') return
    expect(s.reason).toBeInstanceOf(InvalidWriteError)
    expect(s.reason).toBeInstanceOf(TypeError)
    expect(s.reason).toMatchObject({ name: 'InvalidWriteError', code: ErrorCodes.INVALID_WRITE, outcome: 'not-sent', attempts: 0 })
    expect(s.reason.message).toMatch(message)
    await wb.flush()
    expect(fake.calls).toHaveLength(0)
    expect(wb.stats()).toMatchObject({ pending: 0, failedOps: 0 })
  })

  it('the valid writes queued in the same tick all succeed; the bad ones never join the batch', async () => {
    const { fake, wb, c } = harness()
    const l = c as unknown as Loose
    const writes = [
      settle(c.insertOne({ _id: 1 })),
      settle(l.insertOne(null)),
      settle(c.insertOne({ _id: 2 })),
      settle(l.insertOne({ $bad: 1 })),
      settle(c.insertOne({ _id: 3 })),
      settle(l.updateOne({ _id: 1 }, { plain: 1 })),
      settle(c.updateOne({ _id: 4 }, { $set: { a: 1 } }, { upsert: true })),
    ]
    const results = await Promise.all(writes)
    expect(results.map(r => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'rejected', 'fulfilled', 'rejected', 'fulfilled'])
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(InvalidWriteError)
    expect(fake.calls.map(call => call.ids)).toEqual([[1, 2, 3], [4]])
    expect(wb.stats()).toMatchObject({ flushedOps: 4, pending: 0 })
  })

  it('what BSON sends as written is still accepted: null and undefined in a filter array, valid Dates, a function field of a document (left out, as the driver does)', async () => {
    const { fake, c } = harness()
    const l = c as unknown as Loose
    await Promise.all([
      c.deleteMany({ owner: null }),
      c.deleteMany({ owner: { $in: [null, undefined, 'ann'] } }),
      c.updateOne({ _id: 1 }, { $set: { at: new Date(0), b: undefined } }),
      c.insertOne({ _id: 2, at: new Date(), f: fn }),
      l.updateOne({ _id: 3 }, { $set: { f: null } }),
    ])
    expect(fake.calls.flatMap(call => call.kinds)).toHaveLength(5)
  })

  it('a class instance is sent as its own fields: its methods, inherited or arrow-function fields, are left out (as BSON does), not refused', async () => {
    function Money (this: { amount: number }, amount: number): void { this.amount = amount }
    Money.prototype.format = function (this: { amount: number }): string { return `$${this.amount}` } // ES5: enumerable, inherited
    class Price { amount = 5; format = (): string => `$${this.amount}` }
    const money = new (Money as unknown as new (a: number) => object)(5)
    const { fake, c } = harness()
    await Promise.all([
      c.updateOne({ _id: 1 }, { $set: { price: money } }),
      c.updateOne({ price: money }, { $set: { x: 1 } }),
      c.updateOne({ _id: 2 }, { $set: { price: new Price() } }),
      c.updateOne({ _id: 3 }, { $push: { prices: new Price() } }),
      c.insertOne({ _id: 4, price: new Price() }),
    ])
    expect(fake.calls.flatMap(call => call.kinds)).toHaveLength(5)
  })

  it('a pkFactory whose createPk() returns a Symbol or a function: refused (BSON would leave the _id out)', () => {
    expect(() => buildInsert({}, undefined, { createPk: () => Symbol('pk') })).toThrow(/createPk\(\) returned Symbol\(pk\)/)
    expect(() => buildInsert({}, undefined, { createPk: () => fn })).toThrow(/createPk\(\) returned a function/)
  })

  it('an invalid collection name throws InvalidWriteError at once', () => {
    const { wb } = harness()
    expect(() => wb.collection('a$b')).toThrow(InvalidWriteError)
    expect(() => wb.collection('')).toThrow(/invalid collection name: ""/)
    expect(() => wb.collection('system.users')).toThrow(/invalid collection name: "system.users"/)
  })

  it('the caller\'s document gets the generated _id before the write is queued', async () => {
    const { c } = harness()
    const doc: Document = { a: 1 }
    const p = c.insertOne(doc)
    expect(doc._id).toBeDefined()
    await expect(p).resolves.toEqual({ insertedId: doc._id })
  })
})
