import { describe, expect, it } from 'vitest'
import { answerOf } from '../../src/cache/footprint.js'
import { NotedWrites } from '../../src/cache/noted-writes.js'
import { buildInsert, buildUpdate } from '../../src/write/build-op.js'
import { tryCoalesce } from '../../src/write/coalesce.js'
import type { WriteOp } from '../../src/write/write-op.js'
import { track } from './fake-db.js'

/**
 * The writes the read cache keeps for read-your-writes (noted-writes.ts), without a server: a
 * collection no read has asked about keeps its writes unindexed (`defer`), and the first read
 * that asks (`watch`) must still find every one of them that has not settled.
 */

const set = (id: number, v: number): WriteOp => buildUpdate(false, { _id: id }, { $set: { v } }, undefined)
const turn = (): Promise<void> => new Promise(resolve => setImmediate(resolve))

describe('writes to a collection no read has asked about', () => {
  it('are found by the first read that asks, in queue order, while unsettled; the settled ones are not', () => {
    const noted = new NotedWrites()
    const first = set(1, 1)
    const second = set(1, 2)
    const other = set(2, 1)
    for (const op of [first, second, other]) noted.defer('users', op)
    expect(noted.watches('users')).toBe(false)
    first.settle() // as the Settler does, then tells the cache
    expect(noted.settle('users', first)).toBeUndefined() // settled before any read: nothing keeps it
    noted.watch('users', () => {})
    expect(noted.watches('users')).toBe(true)
    expect(noted.toDocument('users', { _id: 1 })).toEqual([second])
    expect(noted.toDocument('users', { _id: 2 })).toEqual([other])
    const mark = noted.begin({})
    // a read by another field: the unsettled write of its document is one it missed
    const check = noted.check('users', answerOf({ name: 'ann' }, { _id: 1, name: 'ann', v: 0 }, false), mark)
    expect(check.missed).toEqual([second])
  })

  it('an insert deferred before the read is a write the read missed, so its answer waits for it', () => {
    const noted = new NotedWrites()
    const insert = buildInsert({ name: 'cy' }, undefined)
    noted.defer('users', insert)
    noted.watch('users', () => {})
    const mark = noted.begin({})
    // the server has not seen the insert yet: no document; the read must wait and read again
    expect(noted.check('users', answerOf({ name: 'cy' }, null, false), mark).missed).toEqual([insert])
  })

  it('once watched, a write is indexed when noted; other collections stay deferred', () => {
    const noted = new NotedWrites()
    noted.watch('users', () => {})
    const later = set(1, 3)
    noted.add('users', later)
    expect(noted.toDocument('users', { _id: 1 })).toEqual([later])
    const event = set(1, 4)
    noted.defer('events', event)
    expect(noted.watches('events')).toBe(false)
    // settling a deferred write leaves the watched collection's writes alone
    event.settle()
    noted.settle('events', event)
    expect(noted.toDocument('users', { _id: 1 })).toEqual([later])
    later.settle()
    noted.settle('users', later)
    expect(noted.toDocument('users', { _id: 1 })).toEqual([])
  })

  it('a write that stays unsettled while thousands settle around it is still found (the settled ones are dropped from the list now and then)', () => {
    const noted = new NotedWrites()
    const stuck = set(7, 1)
    noted.defer('users', stuck)
    for (let i = 0; i < 5_000; i++) {
      const op = set(100 + i, i)
      noted.defer('users', op)
      op.settle()
      noted.settle('users', op)
    }
    const last = set(8, 1)
    noted.defer('users', last)
    noted.watch('users', () => {})
    expect(noted.toDocument('users', { _id: 7 })).toEqual([stuck])
    expect(noted.toDocument('users', { _id: 8 })).toEqual([last])
    expect(noted.toDocument('users', { _id: 100 })).toEqual([])
  })

  it('a write coalesced before the read asked is judged by its own update, not the merged one it sends', () => {
    const noted = new NotedWrites()
    const leader = buildUpdate(false, { _id: 1 }, { $set: { email: 'a' } }, undefined)
    const next = buildUpdate(false, { _id: 1 }, { $set: { email: 'b' } }, undefined)
    noted.defer('users', leader)
    noted.defer('users', next)
    expect(tryCoalesce(leader, next)).toBe(true) // the leader now sends email 'b'
    noted.watch('users', () => {})
    const mark = noted.begin({})
    // the server has neither yet: a read by email 'a' must wait for the leader (it may be sent alone if the merge is refused)
    expect(noted.check('users', answerOf({ email: 'a' }, null, false), mark).missed).toEqual([leader])
    expect(noted.check('users', answerOf({ email: 'b' }, null, false), mark).missed).toEqual([next]) // as if indexed when queued
  })

  it('more unsettled than a first read indexes at once: every read of the collection waits for them all, and the queue is sent', async () => {
    const noted = new NotedWrites()
    const ops = Array.from({ length: 1001 }, (_, i) => set(i, 1))
    for (const op of ops) noted.defer('users', op)
    let sent = 0
    const first = track(noted.watch('users', () => { sent++ }) as Promise<void>)
    const second = track(noted.watch('users', () => { sent++ }) as Promise<void>)
    expect(sent).toBe(2)
    expect(noted.toDocument('users', { _id: 3 })).toEqual([]) // not indexed: waited for instead
    const later = set(3, 2)
    noted.add('users', later) // a write after the read asked is indexed
    expect(noted.toDocument('users', { _id: 3 })).toEqual([later])
    for (const op of ops.slice(0, 1000)) {
      op.settle()
      noted.settle('users', op)
    }
    await turn()
    expect(first.done || second.done).toBe(false)
    const last = ops[1000] as WriteOp
    last.settle()
    noted.settle('users', last)
    await turn()
    expect(first.done && second.done).toBe(true)
    expect(noted.watch('users', () => { sent++ })).toBeUndefined()
    expect(sent).toBe(2)
  })
})
