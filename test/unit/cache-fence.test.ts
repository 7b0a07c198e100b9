import { describe, expect, it } from 'vitest'
import { networkError, pause, type Responder } from './fake-db.js'
import { harness } from './harness.js'

/** The server answers nothing (the connection fails), and applies the attempt `lateMs` later (docs/server-behaviours.md: a timed-out attempt may still apply; `maxTimeMS` starts when the server reads the command). */
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

  it('a write timed out while its batch waits out the fence to be retried: the answer read meanwhile is not kept either', async () => {
    const { fake, wb } = harness({ cache: { ttlMs: 60_000 }, maxTimeMS: 200 })
    fake.applyModels('users', [{ insertOne: { document: { _id: 'u1' as never, v: 0 } } }], false)
    const users = wb.collection<{ _id: string, v: number }>('users')
    expect(await users.findOne({ _id: 'u1' })).toEqual({ _id: 'u1', v: 0 })
    let open!: () => void
    fake.pingGate = new Promise<void>(resolve => { open = resolve }) // a paused server: the proof that the attempt can no longer apply is late
    try {
      fake.next(appliedLate(1_600))
      // retry-safe: it waits for its retry behind the fence, and times out there, told unknown
      await expect(users.updateOne({ _id: 'u1' }, { $set: { v: 1 } }, { timeoutMs: 1_400 })).rejects.toMatchObject({ code: 'WRITE_BUFFER_TIMEOUT', outcome: 'unknown' })
      expect(await users.findOne({ _id: 'u1' })).toEqual({ _id: 'u1', v: 0 })
      await pause(400) // the first attempt lands at 1.6 s
      expect(await users.findOne({ _id: 'u1' })).toEqual({ _id: 'u1', v: 1 }) // was { v: 0 }, cached before it landed
    } finally {
      open()
    }
  })
})
