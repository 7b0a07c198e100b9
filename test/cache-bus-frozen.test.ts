import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MongoClient, type Db } from 'mongodb'
import { WriteBuffer, type Logger } from '../src/index.js'
import { mongoUri } from './helpers.js'
// @ts-expect-error plain ESM script shared with the test setup
import { startRedis } from '../scripts/redis.mjs'

/**
 * A frozen Redis (SIGSTOP: its kernel still accepts and acknowledges TCP, as a stuck server or a
 * silent network partition does) must be noticed: the bus's heartbeat stops coming back, the bus
 * goes offline and the offline rule (offlineTtlMs) holds; when Redis thaws, the recovery after an
 * outage applies. Each test starts its own redis-server and freezes it by its pid.
 */

interface RedisServer { url: string, port: number, pid: number, stop: () => Promise<void> }

const DB = 'fwb_cache_bus_frozen'
const clients: MongoClient[] = []
let dbA: Db
let dbB: Db
beforeAll(async () => {
  for (let i = 0; i < 2; i++) {
    const client = new MongoClient(mongoUri())
    await client.connect()
    clients.push(client)
  }
  dbA = (clients[0] as MongoClient).db(DB)
  dbB = (clients[1] as MongoClient).db(DB)
  await dbA.dropDatabase()
})
afterAll(async () => { for (const c of clients) await c.close() })

function recordingLogger (): Logger & { warnings: string[] } {
  const warnings: string[] = []
  return { warnings, debug: () => {}, error: (_o, msg) => { warnings.push(`error: ${msg ?? ''}`) }, warn: (_o, msg) => { warnings.push(msg ?? '') } }
}

async function until (what: string, check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const started = Date.now()
  while (!check()) {
    if (Date.now() - started > timeoutMs) throw new Error(`timed out waiting for: ${what}`)
    await new Promise(resolve => setTimeout(resolve, 2))
  }
}
const online = (wb: WriteBuffer): boolean => wb.cache?.stats().bus?.online === true
const hits = (wb: WriteBuffer): number => wb.cache?.stats().hits ?? 0
const sleep = (ms: number): Promise<void> => new Promise(resolve => setTimeout(resolve, ms))

describe('a frozen Redis (SIGSTOP)', () => {
  for (const OFFLINE_TTL of [0, 500]) {
    it(`offlineTtlMs ${OFFLINE_TTL}: frozen 3 s while B writes every 20 ms, A never serves a value staler than max(offlineTtlMs, heartbeat detection) + 50 ms; thawed, caching comes back`, async () => {
      const server = await startRedis() as RedisServer
      const logA = recordingLogger()
      const wbA = new WriteBuffer(dbA, { cache: { ttlMs: 60_000, negativeTtlMs: 60_000, bus: { redis: server.url, offlineTtlMs: OFFLINE_TTL } }, logger: logA })
      const wbB = new WriteBuffer(dbB, { cache: { ttlMs: 60_000, bus: { redis: server.url } }, logger: recordingLogger() })
      let frozen = false
      try {
        await until('both subscribed', () => online(wbA) && online(wbB))
        const name = `frozen${OFFLINE_TTL}`
        await dbA.collection(name).insertOne({ _id: 1 as never, v: 0 })
        const a = wbA.collection(name)
        const b = wbB.collection(name)
        // B writes v = 1, 2, 3… every 20 ms; ackAt[v] is when v was acknowledged
        const ackAt: number[] = [performance.now()]
        const writing = { on: true }
        const writer = (async () => {
          for (let v = 1; writing.on; v++) {
            await b.updateOne({ _id: 1 }, { $set: { v } })
            ackAt[v] = performance.now()
            await sleep(20)
          }
        })()
        // how stale a value is when A serves it: since the write that replaced it was acknowledged
        let worst = 0
        const readFor = async (ms: number): Promise<void> => {
          const end = performance.now() + ms
          while (performance.now() < end) {
            const doc = await a.findOne({ _id: 1 })
            const next = ackAt[(doc?.v as number) + 1]
            if (next !== undefined) worst = Math.max(worst, performance.now() - next)
            await new Promise(resolve => setImmediate(resolve))
          }
        }
        await readFor(300)
        expect(hits(wbA)).toBeGreaterThan(0)
        const onlineWorst = worst
        worst = 0

        process.kill(server.pid, 'SIGSTOP')
        frozen = true
        await readFor(3_000)
        const frozenWorst = worst
        const detectionMs = wbA.cache?.stats().bus?.heartbeats?.detectionMs as number
        console.log(`[cache-bus frozen] offlineTtlMs ${OFFLINE_TTL}: worst staleness while frozen ${frozenWorst.toFixed(1)} ms (heartbeat detection ${detectionMs} ms)`)
        expect(online(wbA)).toBe(false) // noticed: the heartbeat stopped coming back
        expect(logA.warnings.filter(w => w.includes('subscription lost'))).toHaveLength(1)

        process.kill(server.pid, 'SIGCONT')
        frozen = false
        await until('A online again', () => online(wbA), 10_000)
        writing.on = false
        await writer
        // caching is back, and coherent: the latest value, then a hit
        const latest = ackAt.length - 1
        expect((await a.findOne({ _id: 1 }))?.v).toBe(latest)
        const h = hits(wbA)
        expect((await a.findOne({ _id: 1 }))?.v).toBe(latest)
        expect(hits(wbA)).toBe(h + 1)
        console.log(`[cache-bus frozen] offlineTtlMs ${OFFLINE_TTL}: worst staleness online ${onlineWorst.toFixed(1)} ms, frozen ${frozenWorst.toFixed(1)} ms ` +
          `(bound max(${OFFLINE_TTL}, ${detectionMs}) + 50); ${latest} writes; bus ${JSON.stringify(wbA.cache?.stats().bus)}`)
        expect(frozenWorst).toBeLessThanOrEqual(Math.max(OFFLINE_TTL, detectionMs) + 50)
        expect(detectionMs).toBeLessThanOrEqual(300)
      } finally {
        if (frozen) process.kill(server.pid, 'SIGCONT')
        await wbA.close()
        await wbB.close()
        await server.stop()
      }
    }, 60_000)
  }
})
