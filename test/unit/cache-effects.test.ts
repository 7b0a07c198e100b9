import { describe, expect, it } from 'vitest'
import { BSON, type Document } from 'mongodb'
import { remoteAffects, summarize } from '../../src/cache/bus-message.js'
import { EntryStore } from '../../src/cache/entry-store.js'
import { WriteEffects } from '../../src/cache/write-effects.js'
import { buildDelete, buildUpdate } from '../../src/write/build-op.js'
import type { WriteOp } from '../../src/write/write-op.js'

/** What a write does to cached entries (WriteEffects, local and remote), without a server. */

const none = (): undefined => undefined

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
      new WriteEffects(store).applyRemote('users', write)
      expect(kept(store, keys)).toEqual(['other'])
      expect(remoteAffects(write, { name: 'old' }, { email: 'a@x' }, true, false)).toBe(true)
      expect(remoteAffects(write, { _id: 'a@x', name: 'old' }, { email: 'a@x' }, true, false)).toBe(true)
      expect(remoteAffects(write, { _id: 2, name: 'b' }, { email: 'b@x' }, true, true)).toBe(false)
    })
  }
})
