import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Db, MongoClient } from 'mongodb'
import { WriteBuffer } from '../src/index.js'
import { countWriteCommands, openDb } from './helpers.js'

let client: MongoClient
let db: Db
let commands: ReturnType<typeof countWriteCommands>
const finds = (): number => commands.counts.find ?? 0

beforeAll(async () => {
  ({ client, db } = await openDb('read_cache'))
  commands = countWriteCommands(client)
  await db.collection('users').insertMany([
    { username: 'ann', logins: 0, role: 'user' },
    { username: 'bob', logins: 0, role: 'user' },
  ])
})
afterAll(async () => { await client.close() })

describe('read cache', () => {
  it('100 concurrent findOne for one user → 1 find command', async () => {
    const wb = new WriteBuffer(db, { cache: { ttlMs: 60_000 } })
    const users = wb.collection('users')
    const before = finds()
    const docs = await Promise.all(Array.from({ length: 100 }, () => users.findOne({ username: 'ann' })))
    expect(finds() - before).toBe(1)
    expect(docs.every(d => d?.username === 'ann')).toBe(true)
    expect(docs[0]).not.toBe(docs[1]) // each caller gets its own copy
    expect(wb.cache?.stats()).toMatchObject({ misses: 1, dedupes: 99 })
    await users.findOne({ username: 'ann' })
    expect(finds() - before).toBe(1)
    expect(wb.cache?.stats().hits).toBe(1)
    await wb.close()
  })

  it('a write then a read sees the write (queued, in flight or done) while unrelated entries stay cached', async () => {
    const wb = new WriteBuffer(db, { cache: { ttlMs: 60_000 }, lingerMs: 50 })
    const users = wb.collection('users')
    const ann = await users.findOne({ username: 'ann' })
    const bob = await users.findOne({ username: 'bob' })
    const before = finds()
    // queued, not yet flushed: the read must still see it
    const write = users.updateOne({ _id: ann?._id }, { $set: { lastLoginAt: new Date(1000) }, $inc: { logins: 1 } })
    const seen = await users.findOne({ username: 'ann' })
    expect(seen).toMatchObject({ username: 'ann', logins: 1, lastLoginAt: new Date(1000) })
    await write
    expect(await db.collection('users').findOne({ username: 'ann' })).toMatchObject({ logins: 1, lastLoginAt: new Date(1000) })
    // the unrelated entry was not invalidated, and ann's entry was kept (patched), so no new find
    expect(await users.findOne({ username: 'bob' })).toEqual(bob)
    expect(await users.findOne({ username: 'ann' })).toMatchObject({ logins: 1 })
    expect(finds() - before).toBe(1) // only the test's own direct check above
    expect(wb.cache?.stats().invalidations).toBe(0)
    await wb.close()
  })

  it('a cached null is dropped by an insert that matches it; the next read finds the document', async () => {
    const wb = new WriteBuffer(db, { cache: { ttlMs: 60_000, negativeTtlMs: 60_000 }, lingerMs: 50 })
    const users = wb.collection('users')
    expect(await users.findOne({ username: 'cy' })).toBeNull()
    expect(await users.findOne({ username: 'cy' })).toBeNull()
    const other = await users.findOne({ username: 'zed' })
    expect(other).toBeNull()
    const ins = users.insertOne({ username: 'cy', logins: 0 })
    expect(await users.findOne({ username: 'cy' })).toMatchObject({ username: 'cy' }) // still queued
    await ins
    expect(wb.cache?.stats().invalidations).toBe(1) // 'zed' stays cached
    await wb.close()
  })

  it('an update the cache cannot predict drops only the entries it may touch', async () => {
    const wb = new WriteBuffer(db, { cache: { ttlMs: 60_000 }, lingerMs: 50 })
    const users = wb.collection('users')
    await users.findOne({ username: 'ann' })
    await users.findOne({ username: 'bob' })
    const w = users.updateOne({ username: 'bob' }, { $push: { tags: 'x' } } as never)
    expect(await users.findOne({ username: 'bob' })).toMatchObject({ tags: ['x'] })
    await w
    expect(wb.cache?.stats().invalidations).toBe(1)
    const before = finds()
    await users.findOne({ username: 'ann' })
    expect(finds() - before).toBe(0)
    await wb.close()
  })

  it('a change to a filtered field moves the document out of the cached answer', async () => {
    const wb = new WriteBuffer(db, { cache: { ttlMs: 60_000, negativeTtlMs: 60_000 }, lingerMs: 50 })
    const users = wb.collection('users')
    const dee = await db.collection('users').insertOne({ username: 'dee' })
    expect(await users.findOne({ username: 'dee' })).toMatchObject({ username: 'dee' })
    expect(await users.findOne({ username: 'dora' })).toBeNull()
    const w = users.updateOne({ _id: dee.insertedId }, { $set: { username: 'dora' } })
    expect(await users.findOne({ username: 'dee' })).toBeNull()
    expect(await users.findOne({ username: 'dora' })).toMatchObject({ _id: dee.insertedId })
    await w
    await wb.close()
  })

  it('entries expire after ttlMs and the LRU bound holds', async () => {
    const wb = new WriteBuffer(db, { cache: { ttlMs: 30, maxEntries: 2 } })
    const users = wb.collection('users')
    const before = finds()
    await users.findOne({ username: 'ann' })
    await new Promise(resolve => setTimeout(resolve, 50))
    await users.findOne({ username: 'ann' })
    expect(finds() - before).toBe(2)
    await users.findOne({ username: 'bob' })
    await users.findOne({ username: 'x1' })
    expect(wb.cache?.stats().entries).toBe(2)
    await wb.close()
  })

  it('never serves one filter\'s document for another (projection is part of the key)', async () => {
    const wb = new WriteBuffer(db, { cache: { ttlMs: 60_000 } })
    const users = wb.collection('users')
    const full = await users.findOne({ username: 'ann' })
    const slim = await users.findOne({ username: 'ann' }, { projection: { username: 1 } })
    const bob = await users.findOne({ username: 'bob' })
    expect(Object.keys(slim ?? {}).sort()).toEqual(['_id', 'username'])
    expect(full?.role).toBe('user')
    expect(bob?.username).toBe('bob')
    await wb.close()
  })
  it('reads with sort/skip/collation bypass the cache instead of sharing a key', async () => {
    const wb = new WriteBuffer(db, { cache: { ttlMs: 60_000 } })
    const users = wb.collection('users')
    const asc = await users.findOne({ role: 'user' }, { sort: { username: 1 } })
    const desc = await users.findOne({ role: 'user' }, { sort: { username: -1 } })
    expect(asc?.username).not.toBe(desc?.username)
    expect(wb.cache?.stats().entries).toBe(0)
    await wb.close()
  })

  it('filters the matcher cannot evaluate ($comment, $bits…) bypass the cache, and writes with them drop entries', async () => {
    const wb = new WriteBuffer(db, { cache: { ttlMs: 60_000 }, lingerMs: 20 })
    const users = wb.collection('users')
    await users.findOne({ username: 'ann' })
    expect((await users.findOne({ username: 'ann', $comment: 'login' }))?.username).toBe('ann')
    expect(wb.cache?.stats().entries).toBe(1)
    await users.updateMany({ username: 'ann', $comment: 'touch' }, { $set: { exprTouched: true } })
    expect(await users.findOne({ username: 'ann' })).toMatchObject({ exprTouched: true })
    await wb.close()
  })

  it('$unset of a missing nested path leaves the cached document as the server does', async () => {
    const wb = new WriteBuffer(db, { cache: { ttlMs: 60_000 }, lingerMs: 20 })
    const users = wb.collection('users')
    const bob = await users.findOne({ username: 'bob' })
    await users.updateOne({ _id: bob?._id }, { $unset: { 'nothere.role': '' } })
    expect(await users.findOne({ username: 'bob' })).toEqual(await db.collection('users').findOne({ username: 'bob' }))
    await wb.close()
  })

  it('the first reads of a collection see the writes queued to it before any read asked (such a collection lists them, unindexed)', async () => {
    const direct = db.collection('first_read')
    const { insertedId } = await direct.insertOne({ name: 'eve', logins: 0 })
    // writes wait a minute unless something sends them: a read that must see them sends them at once
    const wb = new WriteBuffer(db, { cache: { ttlMs: 60_000 }, lingerMs: 60_000 })
    const coll = wb.collection('first_read')
    const settledFirst = coll.updateOne({ _id: insertedId }, { $set: { plan: 'pro' } })
    await wb.flush() // settled before any read
    await settledFirst
    const update = coll.updateOne({ _id: insertedId }, { $inc: { logins: 5 } })
    const insert = coll.insertOne({ name: 'fay', logins: 0 })
    const [eve, fay] = await Promise.all([coll.findOne({ name: 'eve' }), coll.findOne({ name: 'fay' })])
    expect(eve).toMatchObject({ logins: 5, plan: 'pro' })
    expect(fay).toMatchObject({ name: 'fay' })
    await Promise.all([update, insert])
    // once watched, a write is applied to the cached answer when it is queued
    const later = coll.updateOne({ _id: insertedId }, { $set: { seen: true } })
    expect(await coll.findOne({ name: 'eve' })).toMatchObject({ logins: 5, seen: true })
    // a first read the cache does not key (sort) waits for them too
    const other = wb.collection('first_read_sorted')
    const gus = other.insertOne({ name: 'gus' })
    expect(await other.findOne({ name: 'gus' }, { sort: { name: 1 } })).toMatchObject({ name: 'gus' })
    await wb.close()
    await Promise.all([later, gus])
  })
})
