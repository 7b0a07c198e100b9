import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { inject } from 'vitest'
import { Redis } from 'ioredis'
import Fastify from 'fastify'
import { BSON, MongoClient, type Collection, type Db, type Document } from 'mongodb'
import { WriteBuffer, writeBufferPlugin, type Logger, type WriteBufferOptions } from '../src/index.js'
import { decode } from '../src/cache/bus-message.js'
import { mongoUri } from './helpers.js'
import { FaultProxy, hostPortOf } from './support/fault-proxy.js'
import { FakeDb, networkError } from './unit/fake-db.js'
// @ts-expect-error plain ESM script shared with the test setup
import { startRedis } from '../scripts/redis.mjs'

/**
 * Cache coherence across instances over a real redis-server (the test setup starts one; no
 * mock): two WriteBuffers on separate MongoClients are two app instances.
 */

interface RedisServer { url: string, port: number, stop: () => Promise<void>, kill: () => Promise<void> }

/** The setup's Redis; a clear failure when there is none. */
function redisUrl (): string {
  const url = inject('redisUrl')
  if (url === '') throw new Error(`the cache-bus tests need a real Redis: ${inject('redisError')}`)
  return url
}

const DB = 'fwb_cache_bus'
// npm test: 400 races (~3 s); the GitHub workflow hunts 2,000 (FWB_FENCE_REPS)
const REPS = Number(process.env.FWB_FENCE_REPS ?? 400)
const clients: MongoClient[] = []
async function instanceDb (): Promise<Db> {
  const client = new MongoClient(mongoUri())
  await client.connect()
  clients.push(client)
  return client.db(DB)
}

let dbA: Db
let dbB: Db
beforeAll(async () => {
  redisUrl()
  dbA = await instanceDb()
  dbB = await instanceDb()
  await dbA.dropDatabase()
})
afterAll(async () => { for (const c of clients) await c.close() })

/** A logger that keeps what was warned. */
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
const received = (wb: WriteBuffer): number => wb.cache?.stats().bus?.received ?? 0
const hits = (wb: WriteBuffer): number => wb.cache?.stats().hits ?? 0
const tick = (): Promise<void> => new Promise(resolve => setImmediate(resolve))

function percentile (sorted: number[], p: number): number {
  return sorted[Math.max(1, Math.ceil((p / 100) * sorted.length)) - 1] as number
}
function distribution (samples: number[]): { p50: number, p90: number, p99: number, max: number } {
  const s = [...samples].sort((a, b) => a - b)
  const r = (x: number): number => Math.round(x * 1000) / 1000
  return { p50: r(percentile(s, 50)), p90: r(percentile(s, 90)), p99: r(percentile(s, 99)), max: r(s[s.length - 1] as number) }
}

function bus (redis: string, more?: { offlineTtlMs?: number, channel?: string }): WriteBufferOptions['cache'] {
  return { ttlMs: 60_000, negativeTtlMs: 60_000, bus: { redis, ...more } }
}

describe('cache bus (real Redis, real server)', () => {
  it('close() still announces the writes it tells unknown (a retry given up): B drops what it cached', async () => {
    const fake = new FakeDb()
    const cache = { ttlMs: 60_000, bus: { redis: redisUrl(), channel: 'fwb-close-unknown' } }
    const a = new WriteBuffer(fake.db, { cache, maxTimeMS: 2_000, closeTimeoutMs: 100 })
    const b = new WriteBuffer(fake.db, { cache })
    await until('both subscribed', () => online(a) && online(b))
    fake.applyModels('users', [{ insertOne: { document: { _id: 'u1' as never, v: 0 } } }], false)
    expect(await b.collection('users').findOne({ _id: 'u1' })).toEqual({ _id: 'u1', v: 0 }) // B caches v: 0
    fake.next(call => { setTimeout(() => { call.db.applyModels(call.collection, call.raw, false) }, 300); throw networkError() })
    const told = a.collection('users').updateOne({ _id: 'u1' }, { $set: { v: 1 } }).catch((e: unknown) => e)
    await new Promise(resolve => setTimeout(resolve, 50)) // it failed ambiguously and waits for its retry behind the fence
    const seen = received(b)
    await a.close() // gives the retry up: told CLOSED, unknown
    expect(await told).toMatchObject({ outcome: 'unknown' })
    // was: its message gathered for the end of the turn, after the bus had closed: never sent
    await until('B heard of it', () => received(b) > seen)
    await new Promise(resolve => setTimeout(resolve, 400)) // the attempt lands
    expect(await b.collection('users').findOne({ _id: 'u1' })).toEqual({ _id: 'u1', v: 1 })
    await b.close()
  })

  it('a write told unknown (its reply lost, the server applied it) is announced: B drops the value it cached before it', async () => {
    const target = hostPortOf(mongoUri())
    if (target === undefined) return
    const proxy = await FaultProxy.start(target.host, target.port)
    const lossy = new MongoClient(proxy.uri(mongoUri()), { socketTimeoutMS: 300, serverSelectionTimeoutMS: 3_000, retryWrites: false })
    try {
      await lossy.connect()
      const wbA = new WriteBuffer(lossy.db(DB), { cache: bus(redisUrl()), maxTimeMS: 300 })
      const wbB = new WriteBuffer(dbB, { cache: bus(redisUrl()) })
      await until('both subscribed', () => online(wbA) && online(wbB))
      await dbA.collection('unknown_told').insertOne({ _id: 1 as never, n: 0 })
      const b = wbB.collection('unknown_told')
      expect((await b.findOne({ _id: 1 }))?.n).toBe(0)
      expect((await b.findOne({ _id: 1 }))?.n).toBe(0) // cached: a hit
      const seen = received(wbB)
      proxy.holdMatching({ match: chunk => chunk.includes('unknown_told'), holdMs: 800, direction: 'reply' })
      await expect(wbA.collection('unknown_told').updateOne({ _id: 1 }, { $inc: { n: 1 } })).rejects.toMatchObject({ outcome: 'unknown' })
      expect((await dbA.collection('unknown_told').findOne({ _id: 1 as never }))?.n).toBe(1)
      // was: never announced (only acknowledged writes were), and B served n: 0 until ttlMs
      await until('B heard of it', () => received(wbB) > seen)
      expect((await b.findOne({ _id: 1 }))?.n).toBe(1)
      await wbA.close()
      await wbB.close()
    } finally {
      await lossy.close()
      await proxy.close()
    }
  })

  it('after B\'s write is acknowledged, A\'s cached findOne returns the new value, every one of 200 trials (latency printed; its 20 ms p99 goal is a bench target)', async () => {
    const wbA = new WriteBuffer(dbA, { cache: bus(redisUrl()) })
    const wbB = new WriteBuffer(dbB, { cache: bus(redisUrl()) })
    await until('both subscribed', () => online(wbA) && online(wbB))
    await dbA.collection('latency').insertOne({ _id: 1 as never, v: -1 })
    const a = wbA.collection('latency')
    const b = wbB.collection('latency')
    const samples: number[] = []
    const busOnly: number[] = [] // ack → A has the message (the rest is A's read from the server)
    for (let i = 0; i < 200; i++) {
      // A holds the current value cached: the next read is a hit
      await a.findOne({ _id: 1 })
      const before = hits(wbA)
      expect((await a.findOne({ _id: 1 }))?.v).toBe(i - 1)
      expect(hits(wbA)).toBe(before + 1)
      const seen = received(wbA)
      await b.updateOne({ _id: 1 }, { $set: { v: i } })
      const acked = performance.now()
      let heard: number | undefined
      for (;;) {
        if (heard === undefined && received(wbA) > seen) heard = performance.now() - acked
        const doc = await a.findOne({ _id: 1 })
        if (doc?.v === i) break
        expect(doc?.v).toBe(i - 1)
        if (performance.now() - acked > 5_000) throw new Error(`trial ${i}: A still serves the old value after 5 s`)
        await tick()
      }
      samples.push(performance.now() - acked)
      busOnly.push(heard ?? performance.now() - acked)
    }
    const d = distribution(samples)
    const m = distribution(busOnly)
    console.log(`[cache-bus] B's ack → A serves the new value, 200 trials (ms): p50 ${d.p50}, p90 ${d.p90}, p99 ${d.p99}, max ${d.max}` +
      ` (of which ack → message at A: p50 ${m.p50}, p99 ${m.p99}, max ${m.max})`)
    // Speed is the bench's to judge (cache-bus suite: target p99 ≤ 20 ms), not a timed test's: on a
    // loaded CI machine one slow trial would fail it. Here: every trial saw the new value, never
    // an older one than the one before the write (asserted in the loop), and no message was lost.
    expect(wbA.cache?.stats().bus).toMatchObject({ online: true, dropped: 0, outages: 0 })
    await wbA.close()
    await wbB.close()
  })

  it(`fencing: a load in flight on A while B writes never caches the old value (${REPS.toLocaleString('en-US')} repetitions)`, async () => {
    // A's reads go through a collection whose findOne waits, after the server answered, for
    // a gate the test opens: the old value is read, then B writes, then A's load completes
    let gate: Promise<void> | undefined
    let answered: (() => void) | undefined
    const slowDb = gatedDb(dbA, async () => {
      answered?.()
      await gate
    })
    const wbA = new WriteBuffer(slowDb, { cache: bus(redisUrl()) })
    const wbB = new WriteBuffer(dbB, { cache: bus(redisUrl()) })
    await until('both subscribed', () => online(wbA) && online(wbB))
    await dbA.collection('fence').insertOne({ _id: 1 as never, v: 0, email: 'x@y' })
    const a = wbA.collection('fence')
    const b = wbB.collection('fence')
    let oldServed = 0
    let cachedAfterUnrelated = 0
    const started = performance.now()
    for (let i = 1; i <= REPS; i++) {
      // half by _id, half by another field: both fences must hold
      const filter = i % 2 === 0 ? { _id: 1 } : { email: 'x@y' }
      let open!: () => void
      gate = new Promise(resolve => { open = resolve })
      const read = new Promise<void>(resolve => { answered = resolve })
      const load = a.findOne(filter)
      await read // the server has answered A with the old value; the load has not stored it yet
      const seen = received(wbA)
      await b.updateOne({ _id: 1 }, { $set: { v: i } })
      await until('A received B\'s message', () => received(wbA) > seen, 5_000)
      open()
      gate = undefined
      expect((await load)?.v).toBe(i - 1) // its read started before the write: the old value, not cached
      const after = await a.findOne(filter)
      if (after?.v !== i) oldServed++
      // an unrelated remote write in flight does not fence it: the same kind of load is cached
      if (i % 100 === 0) {
        const otherId = 10_000 + i // not cached yet
        await dbA.collection('fence').insertOne({ _id: otherId as never, v: 0 })
        const again = new Promise<void>(resolve => { answered = resolve })
        gate = new Promise(resolve => { open = resolve })
        const other = a.findOne({ _id: otherId })
        await again
        const seen2 = received(wbA)
        await b.updateOne({ _id: 1 }, { $set: { w: i } })
        await until('A received B\'s message', () => received(wbA) > seen2, 5_000)
        open()
        gate = undefined
        await other
        const h = hits(wbA)
        await a.findOne({ _id: otherId })
        if (hits(wbA) === h + 1) cachedAfterUnrelated++
      }
    }
    const ms = performance.now() - started
    console.log(`[cache-bus] fencing: ${REPS} loads raced by a remote write, old value served afterwards ${oldServed} times; ` +
      `${Math.floor(REPS / 100)} loads raced by an unrelated remote write, cached ${cachedAfterUnrelated} times (${Math.round(ms)} ms)`)
    expect(oldServed).toBe(0)
    expect(cachedAfterUnrelated).toBe(Math.floor(REPS / 100))
    await wbA.close()
    await wbB.close()
  })

  it('killing redis-server: A never serves a value older than offlineTtlMs (0: never cached); restarting it restores caching', async () => {
    const server = await startRedis() as RedisServer
    const OFFLINE_TTL = 200
    const logA = recordingLogger()
    const wbA = new WriteBuffer(dbA, { cache: bus(server.url, { offlineTtlMs: OFFLINE_TTL }), logger: logA })
    const wbZ = new WriteBuffer(dbA, { cache: bus(server.url) }) // offlineTtlMs 0
    const wbB = new WriteBuffer(dbB, { cache: bus(server.url), logger: recordingLogger() })
    let restarted: RedisServer | undefined
    try {
      await until('all subscribed', () => online(wbA) && online(wbZ) && online(wbB))
      await dbA.collection('kill').insertOne({ _id: 1 as never, v: 0 })
      const b = wbB.collection('kill')
      // B writes v = 1, 2, 3…; ackAt[v] is when v was acknowledged
      const ackAt: number[] = [performance.now()]
      const writing = { on: true }
      const writer = (async () => {
        for (let v = 1; writing.on; v++) {
          await b.updateOne({ _id: 1 }, { $set: { v } })
          ackAt[v] = performance.now()
          await new Promise(resolve => setTimeout(resolve, 3))
        }
      })()
      // how old a value is when served: since the write that replaced it was acknowledged
      const staleness = { online: 0, offline: 0, offlineZero: 0 }
      let offlineHitsZ = 0
      const read = async (wb: WriteBuffer, phase: 'online' | 'offline'): Promise<void> => {
        const hitsBefore = hits(wb)
        const doc = await wb.collection('kill').findOne({ _id: 1 })
        const now = performance.now()
        const next = ackAt[(doc?.v as number) + 1]
        const age = next === undefined ? 0 : now - next
        if (wb === wbZ) {
          if (phase === 'offline' && hits(wb) > hitsBefore) offlineHitsZ++
          if (phase === 'offline') staleness.offlineZero = Math.max(staleness.offlineZero, age)
        } else {
          staleness[phase] = Math.max(staleness[phase], age)
        }
      }
      const readFor = async (ms: number, phase: 'online' | 'offline'): Promise<void> => {
        const end = performance.now() + ms
        while (performance.now() < end) {
          await read(wbA, phase)
          await read(wbZ, phase)
          await tick()
        }
      }
      await readFor(300, 'online')
      const hitsOnline = hits(wbA)
      expect(hitsOnline).toBeGreaterThan(0)

      await server.kill()
      await until('A and Z see the bus down', () => !online(wbA) && !online(wbZ), 2_000)
      await readFor(1_500, 'offline')
      expect(hits(wbA)).toBeGreaterThan(hitsOnline) // young entries still served…
      expect(staleness.offline).toBeLessThanOrEqual(OFFLINE_TTL) // …never older than offlineTtlMs
      expect(offlineHitsZ).toBe(0) // offlineTtlMs 0: every read went to the server
      expect(logA.warnings.filter(w => w.includes('subscription lost'))).toHaveLength(1)

      restarted = await startRedis({ port: server.port }) as RedisServer
      await until('all subscribed again', () => online(wbA) && online(wbZ) && online(wbB), 15_000)
      expect(logA.warnings.filter(w => w.includes('subscription lost'))).toHaveLength(1)
      writing.on = false
      await writer
      await readFor(300, 'online')
      // caching is back, and coherent: the latest value, then hits
      const latest = ackAt.length - 1
      expect((await wbA.collection('kill').findOne({ _id: 1 }))?.v).toBe(latest)
      const h = hits(wbA)
      const hz = hits(wbZ)
      expect((await wbA.collection('kill').findOne({ _id: 1 }))?.v).toBe(latest)
      expect((await wbZ.collection('kill').findOne({ _id: 1 }))?.v).toBe(latest)
      expect((await wbZ.collection('kill').findOne({ _id: 1 }))?.v).toBe(latest)
      expect(hits(wbA)).toBe(h + 1)
      expect(hits(wbZ)).toBeGreaterThan(hz)
      console.log(`[cache-bus] kill/restart: worst staleness served online ${staleness.online.toFixed(1)} ms, ` +
        `offline ${staleness.offline.toFixed(1)} ms (offlineTtlMs ${OFFLINE_TTL}), offlineTtlMs 0: ${offlineHitsZ} hits while down; ` +
        `${ackAt.length - 1} writes; outages seen by A: ${wbA.cache?.stats().bus?.outages ?? 0}`)
      expect(staleness.online).toBeLessThan(OFFLINE_TTL)
    } finally {
      await wbA.close()
      await wbZ.close()
      await wbB.close()
      await server.stop()
      await restarted?.stop()
    }
  })

  it('Redis unreachable at start: the app starts at once, reads the server uncached, warns once, and reconnects by itself', async () => {
    const probe = await startRedis() as RedisServer
    const port = probe.port
    await probe.stop() // a port where nothing listens now
    const url = `redis://127.0.0.1:${port}`
    const log = recordingLogger()
    const t0 = performance.now()
    const wb = new WriteBuffer(dbA, { cache: bus(url), logger: log })
    expect(performance.now() - t0).toBeLessThan(1_000) // never waits for Redis (whose connect would take seconds to fail)
    await dbA.collection('start').insertOne({ _id: 1 as never, v: 1 })
    const c = wb.collection('start')
    for (let i = 0; i < 5; i++) expect(await c.findOne({ _id: 1 })).toMatchObject({ v: 1 })
    expect(hits(wb)).toBe(0)
    await new Promise(resolve => setTimeout(resolve, 600)) // several reconnect attempts
    expect(log.warnings).toHaveLength(1)
    expect(log.warnings[0]).toMatch(/cannot reach Redis/)

    // the plugin: registration does not wait for Redis either
    const app = Fastify()
    const r0 = performance.now()
    await app.register(writeBufferPlugin, { db: dbA, connectTimeoutMs: 0, cache: bus(url) })
    await app.ready()
    expect(performance.now() - r0).toBeLessThan(3_000)
    expect(app.writeBuffer.cache?.stats().bus?.online).toBe(false)

    const server = await startRedis({ port }) as RedisServer
    try {
      await until('subscribed once Redis is up', () => online(wb) && online(app.writeBuffer), 15_000)
      await c.findOne({ _id: 1 })
      await c.findOne({ _id: 1 })
      expect(hits(wb)).toBe(1)
    } finally {
      await app.close()
      await wb.close()
      await server.stop()
    }
  })

  it('a given ioredis client: publishes on it, subscribes on its duplicate, leaves it open; other channels are not heard', async () => {
    const client = new Redis(redisUrl())
    const wbA = new WriteBuffer(dbA, { cache: bus(redisUrl()) })
    const wbB = new WriteBuffer(dbB, { cache: { ttlMs: 60_000, bus: { redis: client } } })
    const wbC = new WriteBuffer(dbB, { cache: bus(redisUrl(), { channel: 'another-app' }) })
    await until('subscribed', () => online(wbA) && online(wbB) && online(wbC))
    await dbA.collection('given').insertOne({ _id: 1 as never, v: 0 })
    await wbA.collection('given').findOne({ _id: 1 })
    await wbC.collection('given').findOne({ _id: 1 })
    const seen = received(wbA)
    await wbB.collection('given').updateOne({ _id: 1 }, { $set: { v: 1 } })
    await until('A heard B', () => received(wbA) > seen)
    expect((await wbA.collection('given').findOne({ _id: 1 }))?.v).toBe(1)
    expect(received(wbC)).toBe(0) // another channel: another app
    expect((await wbC.collection('given').findOne({ _id: 1 }))?.v).toBe(0) // its TTL is its only bound
    expect(wbB.cache?.stats().bus?.received).toBe(0) // its own messages are ignored
    await wbB.close()
    expect(client.status).toBe('ready')
    expect(await client.ping()).toBe('PONG')
    client.disconnect()
    await wbA.close()
    await wbC.close()
  })

  it('what a remote write drops: cached nulls, entries a filter may match, rivals by value; unrelated entries stay', async () => {
    const wbA = new WriteBuffer(dbA, { cache: bus(redisUrl()) })
    const wbB = new WriteBuffer(dbB, { cache: bus(redisUrl()) })
    await until('subscribed', () => online(wbA) && online(wbB))
    const name = 'effects'
    await dbA.collection(name).insertMany([
      { _id: 1, email: 'ann@x', team: 'red', n: 0 },
      { _id: 2, email: 'bob@x', team: 'blue', n: 0 },
      { _id: 3, email: 'cy@x', team: 'green', n: 0 },
    ] as never[])
    const a = wbA.collection(name)
    const b = wbB.collection(name)
    const raw = dbA.collection(name)
    const step = async (write: () => Promise<unknown>): Promise<void> => {
      const seen = received(wbA)
      await write()
      await until('A heard B', () => received(wbA) > seen)
    }
    const same = async (filter: Document): Promise<void> => {
      expect(ejson(await a.findOne(filter)), JSON.stringify(filter)).toBe(ejson(await raw.findOne(filter)))
    }
    const warm = async (...filters: Document[]): Promise<void> => { for (const f of filters) await a.findOne(f) }
    // a signup: the cached "no such email" goes, the other users' entries stay
    await warm({ email: 'dan@x' }, { email: 'bob@x' }, { _id: 3 }, { _id: 4 })
    let entries = wbA.cache?.stats().entries ?? 0
    await step(() => b.insertOne({ _id: 4, email: 'dan@x', team: 'red', n: 0 }))
    expect(wbA.cache?.stats().entries).toBe(entries - 2) // { email: 'dan@x' } and { _id: 4 }
    await same({ email: 'dan@x' })
    await same({ _id: 4 })
    // a write by another field than _id: the entries holding a document it may match go
    await warm({ _id: 1 }, { email: 'ann@x' }, { _id: 2 })
    entries = wbA.cache?.stats().entries ?? 0
    await step(() => b.updateOne({ email: 'ann@x' }, { $inc: { n: 1 } }))
    expect(wbA.cache?.stats().entries).toBe(entries - 2)
    await same({ _id: 1 })
    await same({ email: 'ann@x' })
    // a $set of a value some cached filter tests: that filter's entries go (another document may now match)
    await warm({ team: 'green' }, { team: 'blue' }, { team: 'purple' })
    entries = wbA.cache?.stats().entries ?? 0
    await step(() => b.updateOne({ _id: 2 }, { $set: { team: 'purple' } }))
    await same({ team: 'purple' })
    await same({ team: 'blue' })
    await same({ team: 'green' })
    expect(hits(wbA)).toBeGreaterThan(0)
    // a filter the cache does not decide: the whole collection
    await warm({ _id: 1 }, { _id: 2 })
    await step(() => b.updateMany({ n: { $gte: 0 } }, { $inc: { n: 1 } }))
    expect(wbA.cache?.stats().entries).toBe(0)
    await same({ _id: 1 })
    // an upsert by email: the cached null for its email and for its new _id
    await warm({ email: 'eve@x' })
    await step(() => b.updateOne({ email: 'eve@x' }, { $set: { team: 'red' } }, { upsert: true }))
    await same({ email: 'eve@x' })
    await wbA.close()
    await wbB.close()
  })

  it('one message per acknowledged batch, naming only the acknowledged writes of a partly refused batch', async () => {
    const listener = new Redis(redisUrl())
    const messages: Array<ReturnType<typeof decode>> = []
    listener.on('messageBuffer', (_channel: Buffer, bytes: Buffer) => { messages.push(decode(bytes)) })
    await listener.subscribe('fastify-write-buffer')
    const wbB = new WriteBuffer(dbB, { cache: bus(redisUrl()) })
    await until('subscribed', () => online(wbB))
    await dbA.collection('partial').insertOne({ _id: 'taken' as never })
    const c = wbB.collection('partial')
    const results = await Promise.allSettled(['a', 'taken', 'b', 'c'].map(id => c.insertOne({ _id: id })))
    expect(results.map(r => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled'])
    await Promise.all(Array.from({ length: 50 }, (_, i) => c.updateOne({ _id: 'a' }, { $inc: { n: i } })))
    await until('two messages', () => messages.length >= 2)
    await new Promise(resolve => setTimeout(resolve, 50))
    const [inserts, updates, ...more] = messages
    expect(inserts).toMatchObject({ source: expect.any(String), name: 'partial' })
    expect(inserts?.write.ids.sort()).toEqual(['a', 'b', 'c']) // not 'taken': the server refused it
    expect(updates?.write).toMatchObject({ ids: ['a'], fields: ['n'] }) // 50 writes, one batch, one message
    expect(more).toHaveLength(0)
    expect(wbB.cache?.stats().bus?.published).toBe(2)
    listener.disconnect()
    await wbB.close()
  })

  it('a malformed message is dropped with one warning; a message of another version drops its collection', async () => {
    const log = recordingLogger()
    const wbA = new WriteBuffer(dbA, { cache: bus(redisUrl()), logger: log })
    await until('subscribed', () => online(wbA))
    await dbA.collection('bad').insertOne({ _id: 1 as never, v: 0 })
    await wbA.collection('bad').findOne({ _id: 1 })
    const pub = new Redis(redisUrl())
    await pub.publish('fastify-write-buffer', 'not bson at all')
    await pub.publish('fastify-write-buffer', Buffer.from(BSON.serialize({ v: 1, s: 'x' })))
    await until('dropped', () => (wbA.cache?.stats().bus?.dropped ?? 0) === 2)
    expect(log.warnings).toEqual(['cache bus: malformed message dropped'])
    expect(wbA.cache?.stats().entries).toBe(1)
    await pub.publish('fastify-write-buffer', Buffer.from(BSON.serialize({ v: 99, s: 'future', c: 'bad', something: 'new' })))
    await until('received', () => received(wbA) === 1)
    expect(wbA.cache?.stats().entries).toBe(0)
    expect(online(wbA)).toBe(true)
    pub.disconnect()
    await wbA.close()
  })
})

const ejson = (v: unknown): string => BSON.EJSON.stringify(v, { relaxed: false })

/**
 * The same Db, except that a collection's findOne, once the server has answered, awaits
 * `after()` before returning (the cache's loads only; writes are not delayed).
 */
function gatedDb (db: Db, after: () => Promise<void>): Db {
  const wrap = (c: Collection): Collection => new Proxy(c, {
    get (target, prop) {
      if (prop === 'findOne') {
        return async (...args: Parameters<Collection['findOne']>) => {
          const doc = await target.findOne(...args)
          await after()
          return doc
        }
      }
      const v: unknown = Reflect.get(target, prop, target)
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v
    },
  })
  return new Proxy(db, {
    get (target, prop) {
      if (prop === 'collection') return (name: string) => wrap(target.collection(name))
      const v: unknown = Reflect.get(target, prop, target)
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v
    },
  })
}
