import { describe, expect, it } from 'vitest'
import { BSON, Double, type Document } from 'mongodb'
import { numeric } from '../../src/cache/bson-values.js'
import { remoteFootprint, summarize, type RemoteWrite } from '../../src/cache/bus-message.js'
import { EntryStore } from '../../src/cache/entry-store.js'
import { matches } from '../../src/cache/filter-facts.js'
import { affects as footprintAffects, answerOf, footprintOf } from '../../src/cache/footprint.js'
import { NotedWrites } from '../../src/cache/noted-writes.js'
import { WriteEffects } from '../../src/cache/write-effects.js'
import { buildDelete, buildReplace, buildUpdate } from '../../src/write/build-op.js'
import type { WriteOp } from '../../src/write/write-op.js'

/** What a write does to cached entries (WriteEffects, local and remote), without a server. */

const none = (): undefined => undefined
/** Whether a pending write / a remote batch may change the answer `doc` to `filter` (one rule: footprint.ts#affects). */
const affects = (op: WriteOp, doc: Document | null, filter: Document, projected: boolean): boolean => footprintAffects(footprintOf(op), answerOf(filter, doc, projected))
const remoteAffects = (write: RemoteWrite, doc: Document | null, filter: Document, projected: boolean, idKnown?: boolean): boolean =>
  footprintAffects(remoteFootprint(write), answerOf(filter, doc, projected, idKnown))

/** A store holding one answer per [key, filter, doc, projected, idKnown]. */
function storeOf (entries: Array<[string, Document, Document | null, boolean, boolean]>): EntryStore {
  const store = new EntryStore({ maxEntries: 100, maxBytes: 1 << 20 })
  for (const [key, filter, doc, projected, idKnown] of entries) {
    store.put(key, 'users', filter, projected, doc === null ? null : BSON.serialize(doc), doc, 60_000, 0, idKnown)
  }
  return store
}
const kept = (store: EntryStore, keys: string[]): string[] => keys.filter(k => store.get(k, 0) !== undefined)

describe('answers whose projection hides _id', () => {
  const entries = (): Array<[string, Document, Document | null, boolean, boolean]> => [
    ['no-id', { email: 'a@x' }, { name: 'old' }, true, false], // { _id: 0, name: 1 }
    ['computed-id', { email: 'a@x' }, { _id: 'a@x', name: 'old' }, true, false], // { _id: '$email', name: 1 }
    ['other', { email: 'b@x' }, { _id: 2, name: 'b' }, true, true], // { name: 1 }: _id 2 shown, not 1
  ]
  const keys = ['no-id', 'computed-id', 'other']
  const writes: Array<[string, WriteOp]> = [
    ['updateOne by _id', buildUpdate(false, { _id: 1 }, { $set: { name: 'new' } }, undefined)],
    ['deleteOne by _id', buildDelete(false, { _id: 1 }, undefined)],
  ]
  for (const [label, op] of writes) {
    it(`a local ${label} drops them (it may be their document)`, () => {
      const store = storeOf(entries())
      new WriteEffects(store).apply('users', op)
      expect(kept(store, keys)).toEqual(['other'])
    })
    it(`a remote ${label} drops them, and fences such a load in flight`, () => {
      const store = storeOf(entries())
      const write = summarize([op], none)
      new WriteEffects(store).applyRemote('users', remoteFootprint(write))
      expect(kept(store, keys)).toEqual(['other'])
      expect(remoteAffects(write, { name: 'old' }, { email: 'a@x' }, true, false)).toBe(true)
      expect(remoteAffects(write, { _id: 'a@x', name: 'old' }, { email: 'a@x' }, true, false)).toBe(true)
      expect(remoteAffects(write, { _id: 2, name: 'b' }, { email: 'b@x' }, true, true)).toBe(false)
    })
  }
})

describe('entries patched ahead of the server by writes still pending here', () => {
  // the cached { _id: 1 } read was patched by a queued $set email 'f'; the server still has 'e'
  const setup = () => {
    const store = storeOf([['one', { _id: 1 }, { _id: 1, email: 'e', name: 'old' }, false, true], ['two', { _id: 2 }, { _id: 2, email: 'z', name: 'b' }, false, true]])
    const pending = new NotedWrites()
    const effects = new WriteEffects(store)
    const own = buildUpdate(false, { _id: 1 }, { $set: { email: 'f' } }, undefined)
    pending.add('users', own)
    effects.apply('users', own)
    expect(BSON.deserialize(store.get('one', 0)?.bytes as Uint8Array)).toMatchObject({ email: 'f' })
    return { store, effects, pending, own }
  }
  it('a local write by another field drops them: the server may apply it to the unpatched document first', () => {
    const { store, effects } = setup()
    effects.apply('users', buildUpdate(false, { email: 'e' }, { $set: { name: 'x' } }, undefined))
    expect(kept(store, ['one', 'two'])).toEqual(['two'])
  })
  it('a remote write by another field drops them too', () => {
    const { store, effects } = setup()
    effects.applyRemote('users', remoteFootprint(summarize([buildUpdate(false, { email: 'e' }, { $set: { name: 'x' } }, undefined)], none)))
    expect(kept(store, ['one', 'two'])).toEqual(['two'])
  })
  it('once the patching write settled (the server has it), they are judged like any entry again', () => {
    const { store, effects, pending, own } = setup()
    const caughtUp = pending.settle('users', own)
    expect(caughtUp).toBeDefined()
    effects.caughtUp('users', caughtUp as string)
    effects.apply('users', buildUpdate(false, { email: 'e' }, { $set: { name: 'x' } }, undefined)) // matches neither now
    expect(kept(store, ['one', 'two'])).toEqual(['one', 'two'])
  })
})

describe('a patch redoes the per-field index of the fields it changed only', () => {
  const write = (filter: Document, update: Document): WriteOp => buildUpdate(false, filter, update, undefined)
  const settle = (store: EntryStore, pending: NotedWrites, effects: WriteEffects, op: WriteOp): void => {
    pending.add('users', op)
    effects.apply('users', op)
    const caughtUp = pending.settle('users', op) // acknowledged: the entry is the server's again
    if (caughtUp !== undefined) effects.caughtUp('users', caughtUp)
  }
  it('a field set by a patch is found by its new value, not its old one; an unset field by neither', () => {
    for (const [update, oldFound, newFound] of [
      [{ $set: { email: 'b@x' } }, false, true],
      [{ $unset: { email: '' } }, false, false],
    ] as const) {
      const store = storeOf([['one', { _id: 1 }, { _id: 1, email: 'a@x', n: 1 }, false, true]])
      const effects = new WriteEffects(store)
      const pending = new NotedWrites()
      settle(store, pending, effects, write({ _id: 1 }, update))
      expect(store.withField('users', ['email', 'a@x']).length, JSON.stringify(update)).toBe(oldFound ? 1 : 0)
      expect(store.withField('users', ['email', 'b@x']).length, JSON.stringify(update)).toBe(newFound ? 1 : 0)
      expect(store.withField('users', ['n', 1])).toHaveLength(1) // untouched field: still listed
    }
  })
})

/** The patched document of a cached `{ _id: 1 }` read after `update`, as EJSON; null when the entry was dropped. */
function patched (doc: Document, update: Document): string | null {
  const store = storeOf([['e', { _id: 1 }, doc, false, true]])
  new WriteEffects(store).apply('users', buildUpdate(false, { _id: 1 }, update, undefined))
  const entry = store.get('e', 0)
  return entry?.bytes == null ? null : BSON.EJSON.stringify(BSON.deserialize(entry.bytes, { promoteValues: false }), { relaxed: false })
}
const order = (s: string | null): string[] | null => s === null ? null : Object.keys(JSON.parse(s) as object)

describe('patch field order (MongoDB ≥ 5.0: one update applies its paths in name order)', () => {
  it('new fields are created by name, whatever the order or operator they were written in', () => {
    expect(order(patched({ _id: 1, k: 0 }, { $set: { zeta: 1, alpha: 1 } }))).toEqual(['_id', 'k', 'alpha', 'zeta'])
    expect(order(patched({ _id: 1, k: 0 }, { $set: { zeta: 1 }, $inc: { alpha: 1 }, $max: { mid: 1 } }))).toEqual(['_id', 'k', 'alpha', 'mid', 'zeta'])
    expect(patched({ _id: 1 }, { $set: { 'b.y': 1, 'a.x': 1, 'b.x': 1 } })).toBe('{"_id":{"$numberInt":"1"},"a":{"x":{"$numberInt":"1"}},"b":{"x":{"$numberInt":"1"},"y":{"$numberInt":"1"}}}')
    // existing fields stay where they are
    expect(order(patched({ _id: 1, z: 0, a: 0 }, { $set: { z: 1, b: 1, a: 1 } }))).toEqual(['_id', 'z', 'a', 'b'])
  })

  it('where the order is not modelled, or the server refuses the update, the entry is dropped', () => {
    expect(patched({ _id: 1 }, { $set: { 10: 1, 9: 1 } })).toBeNull() // numeric names: numeric order
    expect(patched({ _id: 1 }, { $set: { 'a.10': 1, 'a.b': 1 } })).toBeNull()
    expect(patched({ _id: 1 }, { $set: { é: 1, z: 1 } })).toBeNull() // not ASCII
    expect(patched({ _id: 1 }, { $set: { 'a.x': 1, 'a-b': 1 } })).toBeNull() // part by part ≠ whole string
    expect(patched({ _id: 1 }, { $set: { a: 1 }, $inc: { a: 1 } })).toBeNull() // conflict: refused by the server
    expect(patched({ _id: 1 }, { $set: { a: 1, 'a.b': 1 } })).toBeNull()
    expect(patched({ _id: 1, a: [{ b: 1 }] }, { $set: { 'a.$.b': 1 } })).toBeNull() // positional
    // one path: its order cannot matter
    expect(patched({ _id: 1 }, { $set: { 10: 1 } })).not.toBeNull()
    expect(order(patched({ _id: 1 }, { $set: { é: 1 } }))).toEqual(['_id', 'é'])
  })
})

describe('undefined in a write (the driver sends null, or leaves the field out with ignoreUndefined)', () => {
  it('is never patched: the entry is dropped', () => {
    expect(patched({ _id: 1, a: 1 }, { $set: { a: 2, b: undefined } })).toBeNull()
    expect(patched({ _id: 1, a: 1 }, { $set: { a: { x: [1, undefined] } } })).toBeNull()
    expect(patched({ _id: 1, a: 1 }, { $set: { a: new Map([['x', undefined]]) } })).toBeNull()
    const store = storeOf([['e', { _id: 1 }, { _id: 1, a: 1 }, false, true]])
    new WriteEffects(store).apply('users', buildReplace({ _id: 1 }, { a: 3, sub: { x: undefined } }, undefined))
    expect(store.get('e', 0)).toBeUndefined()
    expect(patched({ _id: 1, a: 1 }, { $set: { a: null } })).not.toBeNull() // null is a value
  })
})

describe('field names that are Object.prototype names', () => {
  it('a path through __proto__ is never patched (an assignment would set a prototype)', () => {
    expect(patched({ _id: 1, a: 1 }, { $set: JSON.parse('{"__proto__": 5, "b": 2}') as Document })).toBeNull()
    expect(patched({ _id: 1, a: 1 }, { $set: { '__proto__.x': 1 } })).toBeNull()
    expect(patched({ _id: 1, a: 1 }, { $inc: { 'a.__proto__': 1 } })).toBeNull()
  })

  it('inherited names are not fields: $inc/$max create them, a filter on them does not match', () => {
    expect(patched({ _id: 1 }, { $inc: { constructor: 1 } })).toBe('{"_id":{"$numberInt":"1"},"constructor":{"$numberInt":"1"}}')
    expect(patched({ _id: 1 }, { $max: { toString: 3 } })).toBe('{"_id":{"$numberInt":"1"},"toString":{"$numberInt":"3"}}')
    expect(patched({ _id: 1 }, { $set: { 'valueOf.x': 3 } })).toBe('{"_id":{"$numberInt":"1"},"valueOf":{"x":{"$numberInt":"3"}}}')
    expect(matches({ toString: 'x' }, { _id: 1 })).toBe(false)
    expect(matches({ constructor: 1 }, { _id: 1, constructor: 1 })).toBe(true)
  })
})

describe('a write with a collation (its filter compares strings its own way; the cache compares bytes)', () => {
  const collation = { locale: 'en', strength: 2 } // case-insensitive: 'A@X' selects 'a@x'
  const entries = (): Array<[string, Document, Document | null, boolean, boolean]> => [
    ['by-id', { _id: 1 }, { _id: 1, email: 'a@x', plan: 'free' }, false, true],
    ['by-email', { email: 'a@x' }, { _id: 1, email: 'a@x', plan: 'free' }, false, true],
    ['by-string-id', { _id: 'a' }, { _id: 'a', plan: 'free' }, false, true],
    ['negative', { email: 'z@x' }, null, false, true],
  ]
  const keys = ['by-id', 'by-email', 'by-string-id', 'negative']
  const writes: Array<[string, WriteOp]> = [
    ['updateOne by email', buildUpdate(false, { email: 'A@X' }, { $set: { plan: 'pro' } }, { collation })],
    ['updateOne by _id', buildUpdate(false, { _id: 'A' }, { $set: { plan: 'pro' } }, { collation })],
    ['deleteOne by email', buildDelete(false, { email: 'A@X' }, { collation })],
  ]
  for (const [label, op] of writes) {
    it(`${label}: drops every entry of the collection, and a read may be raced by it`, () => {
      const store = storeOf(entries())
      new WriteEffects(store).apply('users', op)
      expect(kept(store, keys)).toEqual([])
      expect(affects(op, { _id: 1, email: 'a@x', plan: 'free' }, { email: 'a@x' }, false)).toBe(true)
      expect(affects(op, { _id: 'a', plan: 'free' }, { _id: 'a' }, false)).toBe(true)
      const pending = new NotedWrites()
      pending.add('users', op)
      expect(pending.toDocument('users', { _id: 'a' })).toEqual([op])
      expect(pending.check('users', answerOf({ _id: 'a' }, { _id: 'a', plan: 'free' }, false), { startSeq: 1, settleMark: 0 }).missed).toEqual([op])
      expect(summarize([op], none).all).toBe(true)
    })
  }
})

describe('-0 (js-bson serializes it as a double, sign kept: int32 + double is a double on the server)', () => {
  it('the driver sends -0 as a BSON double', () => {
    const bytes = BSON.serialize({ x: -0 })
    expect(bytes[4]).toBe(0x01) // element type: double
    expect(Object.is(BSON.deserialize(bytes, { promoteValues: false }).x.value, -0)).toBe(true)
    expect(numeric(-0)).toEqual({ kind: 'double', value: -0 })
    expect(numeric(0)).toEqual({ kind: 'int', value: 0 })
  })

  it('$inc by -0 makes an int32 a double, and sets a missing field to -0', () => {
    expect(patched({ _id: 1, n: 5 }, { $inc: { n: -0, m: -0 } })).toBe('{"_id":{"$numberInt":"1"},"n":{"$numberDouble":"5.0"},"m":{"$numberDouble":"-0.0"}}')
    expect(patched({ _id: 1, n: 5 }, { $inc: { n: 0, m: 0 } })).toBe('{"_id":{"$numberInt":"1"},"n":{"$numberInt":"5"},"m":{"$numberInt":"0"}}')
    expect(patched({ _id: 1, n: 5 }, { $inc: { m: new Double(-0) } })).toBe('{"_id":{"$numberInt":"1"},"n":{"$numberInt":"5"},"m":{"$numberDouble":"-0.0"}}')
  })
})
