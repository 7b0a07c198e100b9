import { describe, expect, it } from 'vitest'
import { networkError, pause, type Responder } from './fake-db.js'
import { harness } from './harness.js'

/** The server answers nothing (the connection fails), and applies the attempt `lateMs` later (PITFALLS 9, 15). */
const appliedLate = (lateMs: number): Responder => call => {
  setTimeout(() => { call.db.applyModels(call.collection, call.raw, false) }, lateMs)
  throw networkError()
}

describe('a write told unknown whose attempt lands late', () => {
  it('the read cache keeps no answer read before the attempt could no longer apply', async () => {
    const { fake, wb } = harness({ cache: { ttlMs: 60_000 }, maxTimeMS: 200 })
    fake.applyModels('users', [{ insertOne: { document: { _id: 'u1' as never, logins: 0 } } }], false)
    const users = wb.collection<{ _id: string, logins: number }>('users')
    expect(await users.findOne({ _id: 'u1' })).toEqual({ _id: 'u1', logins: 0 }) // cached
    fake.next(appliedLate(300))
    await expect(users.updateOne({ _id: 'u1' }, { $inc: { logins: 1 } })).rejects.toMatchObject({ outcome: 'unknown' })
    expect(await users.findOne({ _id: 'u1' })).toEqual({ _id: 'u1', logins: 0 }) // the server's answer now: not applied yet
    await pause(500) // applied now, within the fence (maxTimeMS + margin)
    // was { logins: 0 }: the answer read before the late attempt, cached, served until ttlMs
    expect(await users.findOne({ _id: 'u1' })).toEqual({ _id: 'u1', logins: 1 })
    await pause(1_200) // the fence ends
    expect(await users.findOne({ _id: 'u1' })).toEqual({ _id: 'u1', logins: 1 })
  })
})
