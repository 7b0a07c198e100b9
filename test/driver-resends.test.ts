import { describe, expect, it } from 'vitest'
import { WriteBuffer } from '../src/index.js'
import { capabilities, server } from './support/capabilities.js'
import { proxiedSuite } from './support/proxied.js'

// Resends the buffer can vouch for (issue 41, docs/server-behaviours.md: a replica set in name only). On a replica set the driver resends
// a failed write once by itself, with the same lsid + txnNumber; only a server that honours the
// txnNumber (MongoDB) refuses to apply the first attempt when it arrives late. Here a proxy holds
// the first attempt of an update past the client's socket timeout and then delivers it: the
// driver's resend (if any) is applied and acknowledged, the caller writes again, and the late
// first attempt lands last. The buffer relies on the driver's resend only on MongoDB; elsewhere
// it sends a write command the driver never resends, and its own fence keeps the retry (and
// every later write to those documents) behind the held attempt, which lands within the fence.
// On a standalone server the driver never resends: the same rule holds there too.

const DOCS = 200
const ROUNDS = 3
const SOCKET_TIMEOUT_MS = 1_000
/** the first attempt reaches the server this late: past the socket timeout, inside the fence (maxTimeMS + 1 s after the failure) */
const HELD_MS = 2_500
const MAX_TIME_MS = 3_000

const suite = proxiedSuite('driver_resends')

describe('a first attempt that reaches the server late never lands behind a later acknowledged write', () => {
  it(`${DOCS} documents × ${ROUNDS} rounds: $set v=1 held past the socket timeout and delivered late, then $set v=2: every document ends at the last acknowledged write`, async () => {
    const client = await suite.through({ socketTimeoutMS: SOCKET_TIMEOUT_MS })
    const db = client.db(suite.direct.db.databaseName)
    const wb = new WriteBuffer(db, { maxTimeMS: MAX_TIME_MS, writeTimeoutMs: 0, retry: { maxAttempts: 5, baseDelayMs: 50 } })
    const path = capabilities().replicaSet ? 'the replica-set path (the driver sends lsid + txnNumber)' : 'a standalone server'
    const wrong: string[] = []
    try {
      for (let round = 0; round < ROUNDS; round++) {
        const name = `late_${round}`
        await suite.direct.db.collection<{ _id: number, v: number }>(name).insertMany(Array.from({ length: DOCS }, (_, i) => ({ _id: i, v: 0 })))
        const c = wb.collection<{ _id: number, v: number }>(name)
        // the first update command on this collection is held HELD_MS, then delivered; its reply is dropped
        const held = suite.proxy.fail({ commands: ['update'], collection: name, blockConnection: true, blockTimeMS: HELD_MS, times: 1 })
        const first = await Promise.allSettled(Array.from({ length: DOCS }, (_, i) => c.updateOne({ _id: i }, { $set: { v: 1 } })))
        expect(held.fired).toBe(1)
        const second = await Promise.allSettled(Array.from({ length: DOCS }, (_, i) => c.updateOne({ _id: i }, { $set: { v: 2 } })))
        // give the held attempt time to land, whatever the buffer did
        await new Promise(resolve => setTimeout(resolve, HELD_MS))
        const docs = await suite.direct.db.collection<{ _id: number, v: number }>(name).find().toArray()
        for (const doc of docs) {
          const i = doc._id
          // the value of the last write its caller was told applied (0 if neither)
          const last = second[i]?.status === 'fulfilled' ? 2 : first[i]?.status === 'fulfilled' ? 1 : 0
          const unknown = [first[i], second[i]].some(r => r?.status === 'rejected' && (r.reason as { outcome?: string }).outcome === 'unknown')
          if (doc.v !== last && !unknown) wrong.push(`round ${round} _id ${i}: v=${doc.v}, last acknowledged ${last}`)
          // the second write was acknowledged in every round: nothing should stand in its way
          if (second[i]?.status !== 'fulfilled') wrong.push(`round ${round} _id ${i}: $set v=2 not acknowledged: ${String((second[i] as PromiseRejectedResult | undefined)?.reason)}`)
        }
      }
    } finally {
      await wb.close()
      await client.close(true)
    }
    expect(wrong.slice(0, 10), `${wrong.length} document(s) wrong on ${path} (${server().name} ${server().version})`).toEqual([])
  }, 120_000)
})
