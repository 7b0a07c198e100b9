import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { MongoClient, type Db } from 'mongodb'
import { WriteBuffer, type Logger } from '../src/index.js'
import { mongoUri, openDb } from './helpers.js'
import { DelayProxy } from './support/delay-proxy.js'

/**
 * A slow bus must not look healthy (docs/server-behaviours.md: a heartbeat proves the bus is alive, not that it is prompt): with every byte to and from Redis delayed
 * (a delaying TCP proxy in front of the suite's real redis-server, no mock), another instance's
 * message arrives seconds late, so the bus must count itself offline and the offline rule
 * (`offlineTtlMs`) must hold. Two instances: two WriteBuffers with read caches on one database,
 * each with its own MongoClient and its own ioredis connections through the proxy.
 */

function redisUrl (): string {
  const url = inject('redisUrl')
  if (url === '') throw new Error(`the cache-bus tests need a real Redis: ${inject('redisError')}`)
  return url
}

const clients: MongoClient[] = []
let dbA: Db
let dbB: Db
beforeAll(async () => {
  redisUrl()
  const a = await openDb('cache_bus_slow')
  clients.push(a.client)
  dbA = a.db
  const b = new MongoClient(mongoUri())
  await b.connect()
  clients.push(b)
  dbB = b.db(dbA.databaseName)
})
afterAll(async () => { for (const c of clients) await c.close() })

const quiet: Logger = { debug: () => {}, warn: () => {}, error: () => {} }
const sleep = (ms: number): Promise<void> => new Promise(resolve => setTimeout(resolve, ms))
const online = (wb: WriteBuffer): boolean => wb.cache?.stats().bus?.online === true
const hits = (wb: WriteBuffer): number => wb.cache?.stats().hits ?? 0

async function until (what: string, check: () => boolean, timeoutMs: number): Promise<void> {
  const started = performance.now()
  while (!check()) {
    if (performance.now() - started > timeoutMs) throw new Error(`timed out waiting for: ${what}`)
    await sleep(5)
  }
}

/** Room for a loaded machine (timers and replies late): far below what a slow bus that looks healthy gives (2 × delay). */
const MARGIN_MS = 300

describe('a slow bus (Redis behind a delaying proxy)', () => {
  for (const delayMs of [500, 1_000, 2_000]) {
    it(`delayed ${delayMs} ms each way from the moment of a write: B stops serving the old value within the documented detection time after A's write is acknowledged, and caches again once the bus is prompt`, async () => {
      const target = new URL(redisUrl())
      const proxy = await DelayProxy.start(target.hostname, Number(target.port || 6379))
      const channel = `fwb-slow-${delayMs}`
      const cache = { ttlMs: 60_000, negativeTtlMs: 60_000, bus: { redis: proxy.url(redisUrl()), channel, offlineTtlMs: 0 } }
      const wbA = new WriteBuffer(dbA, { cache, logger: quiet })
      const wbB = new WriteBuffer(dbB, { cache, logger: quiet })
      try {
        await until('both subscribed', () => online(wbA) && online(wbB), 10_000)
        const name = `slow${delayMs}`
        await dbA.collection(name).insertOne({ _id: 1 as never, v: 0 })
        const a = wbA.collection(name)
        const b = wbB.collection(name)
        expect((await b.findOne({ _id: 1 }))?.v).toBe(0)
        const h = hits(wbB)
        expect((await b.findOne({ _id: 1 }))?.v).toBe(0)
        expect(hits(wbB)).toBe(h + 1) // B holds v: 0 cached

        // how long after a write acknowledged on A (v - 1 → v) B still serves v - 1 (each read as its answer arrives)
        const staleness = async (v: number): Promise<number> => {
          await a.updateOne({ _id: 1 }, { $set: { v } })
          const acked = performance.now()
          let staleMs = 0
          for (;;) {
            const doc = await b.findOne({ _id: 1 })
            if (doc?.v === v) return staleMs
            expect(doc?.v).toBe(v - 1)
            staleMs = performance.now() - acked
            if (staleMs > 2 * delayMs + 5_000) return staleMs
            await sleep(5)
          }
        }
        // the bus turns slow as A writes
        proxy.delayMs = delayMs
        const onsetMs = await staleness(1)
        // the bus has been slow for a while: every heartbeat sent since then has come back, late
        await sleep(2 * delayMs + 500)
        expect((await b.findOne({ _id: 1 }))?.v).toBe(1)
        expect((await b.findOne({ _id: 1 }))?.v).toBe(1) // a hit if B trusts its bus
        let steadyMs = 0
        for (let v = 2; v <= 4; v++) steadyMs = Math.max(steadyMs, await staleness(v))
        const busB = wbB.cache?.stats().bus
        const detectionMs = busB?.heartbeats.detectionMs as number
        console.log(`[cache-bus slow] delay ${delayMs} ms each way: B served the old value ${onsetMs.toFixed(1)} ms (the bus turning slow) / worst of 3: ${steadyMs.toFixed(1)} ms (slow for ${2 * delayMs + 500} ms and more) ` +
          `after A's acknowledgment (documented: ${detectionMs} ms with offlineTtlMs 0); B's bus ${JSON.stringify(busB)}`)
        expect(onsetMs).toBeLessThanOrEqual(detectionMs + MARGIN_MS)
        // was: 2 × delayMs (the message's own trip): the late heartbeats kept the bus online
        expect(steadyMs).toBeLessThanOrEqual(detectionMs + MARGIN_MS)
        expect(online(wbB)).toBe(false)
        expect(busB?.outages).toBeGreaterThanOrEqual(1)

        // prompt again: the bus comes back, B caches again, coherent with the latest write
        proxy.delayMs = 0
        await until('B online again', () => online(wbB) && online(wbA), 2 * delayMs + 10_000)
        expect((await b.findOne({ _id: 1 }))?.v).toBe(4)
        const h2 = hits(wbB)
        expect((await b.findOne({ _id: 1 }))?.v).toBe(4)
        expect(hits(wbB)).toBe(h2 + 1)
      } finally {
        await wbA.close()
        await wbB.close()
        await proxy.close()
      }
    }, 60_000)
  }
})
