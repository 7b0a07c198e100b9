import { describe, expect, it } from 'vitest'
import { ServerLiveness } from '../../src/mongo/liveness.js'

// The proof that ends a fence (src/mongo/liveness.ts): a reply to a ping sent after the failure.

describe('ServerLiveness', () => {
  it('a ping that never answers (a connection a silent peer keeps open) counts as failed after its time limit: the next ping proves the server reads again', async () => {
    let pings = 0
    const limits: number[] = []
    const liveness = new ServerLiveness(async timeoutMs => {
      limits.push(timeoutMs)
      if (++pings === 1) await new Promise(() => {}) // stuck for good
    }, 10, 50)
    const since = liveness.clock.now()
    const answeredAt = await liveness.replyAfter(since)
    expect(answeredAt).toBeGreaterThanOrEqual(since)
    expect(pings).toBe(2)
    expect(limits).toEqual([50, 50]) // the ping itself is given the limit, to give its connection up
  })

  it('a ping answered in time proves it at once', async () => {
    const liveness = new ServerLiveness(async () => {}, 10, 5_000)
    const since = liveness.clock.now()
    await expect(liveness.replyAfter(since)).resolves.toBeGreaterThanOrEqual(since)
  })
})
