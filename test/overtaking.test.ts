import { afterAll, beforeAll, describe, it } from 'vitest'
import { MongoClient, type Db } from 'mongodb'
import { WriteBuffer, type WriteBufferOptions } from '../src/index.js'
import { FaultProxy, hostPortOf } from './support/fault-proxy.js'
import { mongoUri, openDb } from './helpers.js'

/**
 * A late first attempt must never land after a later acknowledged write to its document
 * (a timeout does not stop the server executing it). The proxy holds an update command — or its reply — past the
 * driver's socket timeout; the buffer sees an ambiguous failure while the server may still
 * execute the command. Every round writes $set {v: 1} and then $set {v: 2} to each of DOCS (50)
 * documents; at the end every document must equal its last acknowledged write.
 */
const target = hostPortOf(mongoUri())
const DOCS = 50
/**
 * The timings scale with how long this server takes for one such command unheld (T, measured
 * first): an unheld command must finish well within the socket timeout, or the second writes
 * time out too and the round measures the machine's load instead of the fence. On an idle
 * machine they are the floors: 400 / 500 / ~1,150 ms.
 */
let SOCKET_TIMEOUT_MS = 400
/** the buffer's maxTimeMS: the fence after an unknown outcome lasts maxTimeMS + 1 s */
let MAX_TIME_MS = 500
/** the held command reaches the server well after the socket timeout, in the middle of the fence */
let HOLD_MS = 1_200

/** The four rounds run side by side (each with its own proxy and client): the timing is measured that way too. */
const ROUNDS = 4

/** The slowest of 3 × ROUNDS unheld update commands of DOCS `$set` statements, ROUNDS at a time, in ms. */
async function unheldCommandMs (db: Db): Promise<number> {
  const collections = Array.from({ length: ROUNDS }, (_, r) => db.collection<{ _id: number, v: number }>(`timing_${r}`))
  await Promise.all(collections.map(c => c.insertMany(Array.from({ length: DOCS }, (_, k) => ({ _id: k, v: 0 })))))
  let slowest = 0
  for (let i = 1; i <= 3; i++) {
    await Promise.all(collections.map(async c => {
      const t0 = performance.now()
      await c.bulkWrite(Array.from({ length: DOCS }, (_, k) => ({ updateOne: { filter: { _id: k }, update: { $set: { v: i } } } })), { ordered: false })
      slowest = Math.max(slowest, performance.now() - t0)
    }))
  }
  return slowest
}

let direct: MongoClient
let directDb: Db

/** The bytes of an OP_MSG `update` command on `collection` (its first key and value). */
function isUpdateOn (collection: string): (chunk: Buffer) => boolean {
  const needle = Buffer.concat([Buffer.from('\x02update\x00'), Buffer.alloc(4), Buffer.from(collection + '\x00')])
  return chunk => {
    const i = chunk.indexOf(needle.subarray(0, 8))
    return i >= 0 && chunk.subarray(i + 12, i + 12 + collection.length + 1).equals(needle.subarray(12))
  }
}

async function round (name: string, direction: 'request' | 'reply', options: WriteBufferOptions): Promise<{ v2Acked: number, mismatches: number, v1: Record<string, number>, held: number }> {
  await directDb.collection(name).insertMany(Array.from({ length: DOCS }, (_, k) => ({ _id: k, v: 0 })) as never[])
  // each round its own proxy and client: a hold, a fence or a timeout stays inside its round
  const proxy = await FaultProxy.start(target!.host, target!.port)
  const client = new MongoClient(proxy.uri(mongoUri()), { socketTimeoutMS: SOCKET_TIMEOUT_MS, serverSelectionTimeoutMS: 3_000, retryWrites: false })
  try {
    await client.connect()
    // coalesce off: {v: 2} must be its own write, not folded into {v: 1}
    const wb = new WriteBuffer(client.db(directDb.databaseName), { maxTimeMS: MAX_TIME_MS, coalesce: false, ...options })
    const docs = wb.collection(name)
    proxy.holdMatching({ match: isUpdateOn(name), holdMs: HOLD_MS, direction })
    const first = Array.from({ length: DOCS }, (_, k) => docs.updateOne({ _id: k }, { $set: { v: 1 } }))
    const second = Array.from({ length: DOCS }, (_, k) => docs.updateOne({ _id: k }, { $set: { v: 2 } }))
    const v1 = await Promise.allSettled(first)
    const v2 = await Promise.allSettled(second)
    await wb.close()
    // let anything still held in the network land before looking
    await new Promise(resolve => setTimeout(resolve, HOLD_MS + 500))
    return { ...await audit(name, v1, v2), held: proxy.held }
  } finally {
    try {
      await client.close()
    } finally {
      await proxy.close()
    }
  }
}

async function audit (name: string, v1: Array<PromiseSettledResult<unknown>>, v2: Array<PromiseSettledResult<unknown>>): Promise<{ v2Acked: number, mismatches: number, v1: Record<string, number> }> {
  const final = await directDb.collection<{ _id: number, v: number }>(name).find().toArray()
  const lastAcked = new Map<number, number>()
  v1.forEach((r, k) => { if (r.status === 'fulfilled') lastAcked.set(k, 1) })
  v2.forEach((r, k) => { if (r.status === 'fulfilled') lastAcked.set(k, 2) })
  let mismatches = 0
  for (const doc of final) {
    const acked = lastAcked.get(doc._id)
    if (acked !== undefined && doc.v !== acked) mismatches++
  }
  const outcomes: Record<string, number> = {}
  for (const r of v1) {
    const key = r.status === 'fulfilled' ? 'acknowledged' : String((r.reason as { outcome?: string }).outcome)
    outcomes[key] = (outcomes[key] ?? 0) + 1
  }
  return { v2Acked: v2.filter(r => r.status === 'fulfilled').length, mismatches, v1: outcomes }
}

// the rounds wait on holds and fences, not on the CPU: side by side (ROUNDS of them), each with its own proxy
describe.skipIf(target === undefined).concurrent('no overtaking by a late attempt (proxy holds a command past the socket timeout)', () => {
  beforeAll(async () => {
    ({ client: direct, db: directDb } = await openDb('overtaking'))
    const t = await unheldCommandMs(directDb)
    SOCKET_TIMEOUT_MS = Math.max(400, Math.ceil(4 * t))
    MAX_TIME_MS = Math.max(500, Math.ceil(4 * t))
    HOLD_MS = SOCKET_TIMEOUT_MS + Math.ceil((MAX_TIME_MS + 1_000) / 2)
    console.log(`unheld command of ${DOCS} updates, ${ROUNDS} side by side: ${Math.round(t)} ms → socket timeout ${SOCKET_TIMEOUT_MS} ms, maxTimeMS ${MAX_TIME_MS}, hold ${HOLD_MS} ms`)
  })
  afterAll(async () => {
    await direct?.close()
  })

  for (const direction of ['request', 'reply'] as const) {
    it(`held ${direction}, buffer retries on: every document ends at its last acknowledged write`, async ({ expect }) => {
      const r = await round(`held_${direction}_retry`, direction, { retry: { baseDelayMs: 10, maxAttempts: 4 } })
      console.log(`held ${direction}, retries on: first writes ${JSON.stringify(r.v1)}, second writes acknowledged ${r.v2Acked}/${DOCS}, mismatches ${r.mismatches}`)
      expect(r.held).toBeGreaterThan(0)
      expect(r.v2Acked).toBe(DOCS)
      expect(r.mismatches).toBe(0)
    })

    it(`held ${direction}, buffer retries off: the unknown write cannot land after the next one`, async ({ expect }) => {
      const r = await round(`held_${direction}_once`, direction, { retry: { maxAttempts: 1 } })
      console.log(`held ${direction}, retries off: first writes ${JSON.stringify(r.v1)}, second writes acknowledged ${r.v2Acked}/${DOCS}, mismatches ${r.mismatches}`)
      expect(r.v1.unknown).toBe(DOCS)
      expect(r.v2Acked).toBe(DOCS)
      expect(r.mismatches).toBe(0)
    })
  }
})
