import { describe, expect, it } from 'vitest'
import { BSON, BSONRegExp, Decimal128, type Collection, type Document } from 'mongodb'
import { matches } from '../../src/cache/filter-facts.js'
import { ReadCache } from '../../src/cache/read-cache.js'
import { resolveOptions } from '../../src/options.js'
import { buildInsert, buildUpdate } from '../../src/write/build-op.js'
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

describe('a document whose _id is not an exact scalar (Decimal128 1 is the _id 1 on the server)', () => {
  const options = (): NonNullable<ReturnType<typeof resolveOptions>['cache']> => resolveOptions({ cache: { ttlMs: 60_000 } }).cache as NonNullable<ReturnType<typeof resolveOptions>['cache']>

  it('an entry holding it is dropped by a write to that _id in another numeric type', async () => {
    const cache = new ReadCache(options())
    const docs: Document[] = [{ _id: Decimal128.fromString('1'), email: 'e' }]
    const collection = {
      bsonOptions: {},
      findOne: async (filter: Document) => {
        const doc = docs.find(d => d.email === filter.email)
        return doc === undefined ? null : BSON.serialize(doc)
      },
    } as unknown as Collection
    expect(await cache.findOne(collection, 'users', { email: 'e' })).toMatchObject({ email: 'e' })
    const write = buildUpdate(false, { _id: 1 }, { $set: { email: 'f' } }, undefined)
    cache.noteWrite('users', write)
    ;(docs[0] as Document).email = 'f' // the server applies it: the same document
    write.settle()
    cache.settleWrite('users', write, true)
    expect(await cache.findOne(collection, 'users', { email: 'e' })).toBeNull()
  })

  it('a cached "no document" for _id 2 is dropped by an insert of _id Decimal128 2', async () => {
    const cache = new ReadCache(options())
    const docs: Document[] = []
    const collection = {
      bsonOptions: {},
      findOne: async () => docs.length === 0 ? null : BSON.serialize(docs[0] as Document),
    } as unknown as Collection
    expect(await cache.findOne(collection, 'users', { _id: 2 })).toBeNull()
    const insert = buildInsert({ _id: Decimal128.fromString('2'), name: 'two' }, undefined)
    cache.noteWrite('users', insert)
    docs.push({ _id: Decimal128.fromString('2'), name: 'two' })
    insert.settle()
    cache.settleWrite('users', insert, true)
    expect(await cache.findOne(collection, 'users', { _id: 2 })).toMatchObject({ name: 'two' })
  })
})

describe('a patch keeps what it does not change as the server stores it', () => {
  /** One stored document, its bytes as the server would send them; `apply` plays an update by _id on them. */
  function stored (bytes: Uint8Array, bsonOptions: Document): { collection: Collection, set: (next: Uint8Array) => void } {
    let current = bytes
    const collection = { bsonOptions, findOne: async () => current } as unknown as Collection
    return { collection, set: next => { current = next } }
  }
  const options = (): NonNullable<ReturnType<typeof resolveOptions>['cache']> => resolveOptions({ cache: { ttlMs: 60_000 } }).cache as NonNullable<ReturnType<typeof resolveOptions>['cache']>

  it('a regular expression keeps its flags (read with bsonRegExp, as the collection asks)', async () => {
    const cache = new ReadCache(options())
    const doc = { _id: 1, re: new BSONRegExp('a.b', 'imsx'), n: 1 }
    const server = stored(BSON.serialize(doc), { bsonRegExp: true })
    await cache.findOne(server.collection, 'users', { _id: 1 })
    const inc = buildUpdate(false, { _id: 1 }, { $inc: { n: 1 } }, undefined)
    cache.noteWrite('users', inc)
    server.set(BSON.serialize({ ...doc, n: 2 }))
    inc.settle()
    cache.settleWrite('users', inc, true)
    const got = await cache.findOne(server.collection, 'users', { _id: 1 }) as Document
    expect(got.n).toBe(2)
    expect(got.re).toEqual(new BSONRegExp('a.b', 'imsx'))
  })

  it('a field of the deprecated BSON type undefined is not served as null', async () => {
    const cache = new ReadCache(options())
    // { _id: 1, u: <undefined, type 0x06>, n: 1 }: js-bson writes undefined as null, so the type byte is set by hand
    const bytes = BSON.serialize({ _id: 1, u: null, n: 1 })
    const at = Buffer.from(bytes).indexOf(Buffer.from([0x0a, 0x75, 0x00])) // null, "u", NUL
    bytes[at] = 0x06
    const server = stored(bytes, {})
    expect(await cache.findOne(server.collection, 'users', { _id: 1 })).toHaveProperty('u', undefined)
    const inc = buildUpdate(false, { _id: 1 }, { $inc: { n: 1 } }, undefined)
    cache.noteWrite('users', inc)
    const next = Uint8Array.from(bytes)
    next[next.length - 5] = 2 // n: the last int32 before the document's end
    server.set(next)
    inc.settle()
    cache.settleWrite('users', inc, true)
    const got = await cache.findOne(server.collection, 'users', { _id: 1 }) as Document
    expect(got.n).toBe(2)
    expect(got.u).toBeUndefined()
    expect(got).toHaveProperty('u')
  })
})
