import { afterEach, describe, expect, it } from 'vitest'
import type { Collection, Db, Document } from 'mongodb'
import { WriteBuffer } from '../../src/index.js'
import { FakeDb, pause } from './fake-db.js'

/**
 * Readers joining a read in progress (single-flight) whose answer cannot be kept, because a
 * write that may change it was queued while it ran: each must get an answer that shows the
 * writes queued before it asked, after a bounded number of server reads.
 */

const open: WriteBuffer[] = []
afterEach(async () => { for (const wb of open.splice(0)) await wb.close() })

/** `fake.db`, except that every findOne calls `during()` as it starts and answers `ms` later; `finds` counts them. */
function slowFinds (fake: FakeDb, ms: number, during: () => void): { db: Db, finds: () => number } {
  let finds = 0
  const wrap = (c: Collection): Collection => new Proxy(c, {
    get (target, prop) {
      if (prop === 'findOne') {
        return async (...args: Parameters<Collection['findOne']>) => {
          finds++
          const answer = await target.findOne(...args)
          during()
          await pause(ms)
          return answer
        }
      }
      const v: unknown = Reflect.get(target, prop, target)
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v
    },
  })
  const db = new Proxy(fake.db, {
    get (target, prop) {
      if (prop === 'collection') return (name: string) => wrap(target.collection(name))
      const v: unknown = Reflect.get(target, prop, target)
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v
    },
  })
  return { db, finds: () => finds }
}

describe('joiners of a read whose answer cannot be kept', () => {
  it('20 readers joining a read raced by a write each time: they ask again at most once (2 reads in all, not one per reader), and each answer shows the writes queued before it asked', async () => {
    const fake = new FakeDb()
    fake.applyModels('users', [{ insertOne: { document: { _id: 'u1' as never, v: 0 } } }], false)
    let written = 0
    const writes: Array<Promise<unknown>> = []
    // every read of the server is raced by a write to its document (the login path under load)
    const { db, finds } = slowFinds(fake, 5, () => { if (written < 100) writes.push(users.updateOne({ _id: 'u1' }, { $set: { v: ++written } })) })
    const wb = new WriteBuffer(db, { cache: { ttlMs: 60_000 } })
    open.push(wb)
    const users = wb.collection('users')
    const first = users.findOne({ _id: 'u1' }) // its read is under way
    await pause(1) // … and raced: v: 1 queued meanwhile
    expect(written).toBe(1)
    const joiners = Array.from({ length: 20 }, () => users.findOne({ _id: 'u1' }))
    const answers = await Promise.all(joiners)
    await first
    await Promise.all(writes)
    // was: 21 reads, one after another — each round one joiner led a new read (raced again) and the others joined it
    expect(finds()).toBeLessThanOrEqual(3)
    for (const doc of answers) expect((doc as Document).v).toBeGreaterThanOrEqual(1) // v: 1 was queued before they asked
  })
})
