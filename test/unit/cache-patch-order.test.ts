import { describe, expect, it } from 'vitest'
import { BSON, type Collection, type Document } from 'mongodb'
import { matches } from '../../src/cache/filter-facts.js'
import { ReadCache } from '../../src/cache/read-cache.js'
import { resolveOptions } from '../../src/options.js'
import { buildUpdate } from '../../src/write/build-op.js'
import type { WriteOp } from '../../src/write/write-op.js'

/**
 * Writes to different documents have no order on the server: a write by another field than
 * `_id`, queued first, may be applied after a later write by `_id` that the cache patched into
 * an entry, and then match the patched document. Without a server: the test plays the server's
 * order itself, over a one-collection store the cache reads raw.
 */

function server (docs: Document[]): { collection: Collection, apply: (op: WriteOp) => void } {
  const collection = {
    bsonOptions: {},
    findOne: async (filter: Document) => {
      const doc = docs.find(d => matches(filter, d) === true)
      return doc === undefined ? null : BSON.serialize(doc)
    },
  } as unknown as Collection
  const apply = (op: WriteOp): void => {
    const { filter, update } = op.body as { filter: Document, update: Document }
    const doc = docs.find(d => matches(filter, d) === true)
    if (doc !== undefined) Object.assign(doc, update.$set as Document)
    op.settle()
  }
  return { collection, apply }
}

describe('a write by _id patched into an entry while a write by another field is unsettled', () => {
  it('is not patched: the earlier write may be applied after it and match the document (as the server applies them, so the cache answers)', async () => {
    const cache = new ReadCache(resolveOptions({ cache: { ttlMs: 60_000 } }).cache as NonNullable<ReturnType<typeof resolveOptions>['cache']>)
    const { collection, apply } = server([{ _id: 'T', email: 'x', v: 0 }])
    expect(await cache.findOne(collection, 'users', { _id: 'T' })).toEqual({ _id: 'T', email: 'x', v: 0 }) // cached
    const byEmail = buildUpdate(false, { email: 'e' }, { $set: { v: 9 } }, undefined) // matches nothing yet
    cache.noteWrite('users', byEmail)
    const byId = buildUpdate(false, { _id: 'T' }, { $set: { email: 'e' } }, undefined)
    cache.noteWrite('users', byId)
    // the server applies the later one first; the earlier one then matches T
    apply(byId)
    cache.settleWrite('users', byId, true)
    apply(byEmail)
    cache.settleWrite('users', byEmail, true)
    expect(await cache.findOne(collection, 'users', { _id: 'T' })).toEqual({ _id: 'T', email: 'e', v: 9 })
  })

  it('with no such write unsettled, the patch is kept and served (the login path: a hit after its own update)', async () => {
    const cache = new ReadCache(resolveOptions({ cache: { ttlMs: 60_000 } }).cache as NonNullable<ReturnType<typeof resolveOptions>['cache']>)
    const { collection, apply } = server([{ _id: 'T', email: 'x', v: 0 }])
    await cache.findOne(collection, 'users', { _id: 'T' })
    const byId = buildUpdate(false, { _id: 'T' }, { $set: { email: 'e' } }, undefined)
    cache.noteWrite('users', byId)
    expect(cache.stats().patches).toBe(1)
    apply(byId)
    cache.settleWrite('users', byId, true)
    expect(await cache.findOne(collection, 'users', { _id: 'T' })).toEqual({ _id: 'T', email: 'e', v: 0 })
    expect(cache.stats()).toMatchObject({ hits: 1, misses: 1 })
  })
})
