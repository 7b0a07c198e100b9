// Suite: cache coherence across instances over Redis pub/sub (issue 16). Two WriteBuffers on
// separate MongoClients (two app instances) and one real redis-server (REDIS_URL, or one
// started from the Debian package for the run): B updates a document A holds cached; the
// latency is B's acknowledgement → A's cached findOne returns the new value, and the part of
// it that is the bus (B's ack → A has the message). Standalone: `cacheBusSuite(settings)`.
import { MongoClient } from 'mongodb'
import { WriteBuffer } from '../../dist/index.js'
import { resolveRedis } from '../../scripts/redis.mjs'
import { freshDb } from '../db.mjs'
import { withProgress } from '../progress.mjs'
import { per1k, rate, round } from '../stats.mjs'

const tick = () => new Promise(resolve => setImmediate(resolve))

/** Nearest-rank percentiles and the max, in ms (2 decimals). */
function distribution (samples) {
  const s = Float64Array.from(samples).sort()
  const at = p => s[Math.max(1, Math.ceil((p / 100) * s.length)) - 1]
  return { p50Ms: round(at(50), 2), p90Ms: round(at(90), 2), p99Ms: round(at(99), 2), maxMs: round(s[s.length - 1], 2) }
}

async function until (check, timeoutMs) {
  const end = performance.now() + timeoutMs
  while (!check()) {
    if (performance.now() > end) throw new Error('cache bus: not subscribed in time')
    await new Promise(resolve => setTimeout(resolve, 5))
  }
}

export async function cacheBusSuite ({ uri, cacheBusTrials = 500 }) {
  const redis = await resolveRedis()
  const { client: clientA, db: dbA, commands } = await freshDb(uri, 'cache_bus')
  const clientB = new MongoClient(uri, { monitorCommands: true })
  await clientB.connect()
  let updates = 0
  clientB.on('commandStarted', ev => { if (ev.commandName === 'update') updates++ })
  const cache = { ttlMs: 60_000, bus: { redis: redis.url } }
  const wbA = new WriteBuffer(dbA, { cache })
  const wbB = new WriteBuffer(clientB.db(dbA.databaseName), { cache })
  try {
    await until(() => wbA.cache.stats().bus.online && wbB.cache.stats().bus.online, 10_000)
    await dbA.collection('users').insertOne({ _id: 1, v: -1 })
    const a = wbA.collection('users')
    const b = wbB.collection('users')
    const served = []
    const bus = []
    let stale = 0
    const snap = commands.snapshot()
    const started = performance.now()
    await withProgress(`cache bus: ${cacheBusTrials} invalidations across two instances`, async () => {
      for (let i = 0; i < cacheBusTrials; i++) {
        await a.findOne({ _id: 1 }) // cached (a miss only after the previous trial's invalidation)
        const seen = wbA.cache.stats().bus.received
        await b.updateOne({ _id: 1 }, { $set: { v: i } })
        const acked = performance.now()
        let heard
        for (;;) {
          if (heard === undefined && wbA.cache.stats().bus.received > seen) heard = performance.now() - acked
          const doc = await a.findOne({ _id: 1 })
          if (doc?.v === i) break
          stale++
          if (performance.now() - acked > 5_000) throw new Error(`cache bus: trial ${i}: A still stale after 5 s`)
          await tick()
        }
        served.push(performance.now() - acked)
        bus.push(heard ?? performance.now() - acked)
      }
    })
    const elapsedMs = performance.now() - started
    const finds = commands.since(snap, 'find', 'users').commands
    const stats = wbA.cache.stats()
    const common = { rate: rate(cacheBusTrials, elapsedMs), dbCommandsPer1kWrites: per1k(finds + updates, cacheBusTrials), trials: cacheBusTrials }
    const results = [
      {
        key: 'served',
        name: 'B acknowledged → A\'s cached findOne returns the new value',
        ...common,
        ...distribution(served),
        staleHitsBeforeFresh: stale,
        findsPer1kWrites: per1k(finds, cacheBusTrials),
        hits: stats.hits,
        misses: stats.misses,
      },
      { key: 'bus', name: 'B acknowledged → A has the message (Redis pub/sub)', ...common, ...distribution(bus), messagesReceived: stats.bus.received },
    ]
    return {
      title: 'Cache bus: invalidation latency across two instances',
      unit: 'invalidations/s (one at a time)',
      latencyIs: 'from B\'s acknowledged updateOne to A serving the new value (ms); second row: to A receiving the message',
      results,
      ratios: {},
      notes: [
        `two WriteBuffers on two MongoClients, one ${redis.source.replace(/ \(pid \d+\)/, '')}; B updates one document A holds cached, one trial at a time`,
        'A polls its findOne (a hit while the message is on its way) until the new value; the difference between the rows is A\'s read from the server after the entry is dropped',
        'dbCommandsPer1kWrites counts A\'s finds and B\'s update commands',
      ],
    }
  } finally {
    await wbA.close()
    await wbB.close()
    await clientA.close()
    await clientB.close()
    await redis.stop()
  }
}

// standalone: MONGODB_URI=… node bench/suites/cache-bus.mjs (after npm run build)
if (import.meta.url === `file://${process.argv[1]}`) {
  const uri = process.env.MONGODB_URI
  if (!uri) {
    console.error('MONGODB_URI is not set')
    process.exit(2)
  }
  console.log(JSON.stringify(await cacheBusSuite({ uri, cacheBusTrials: Number(process.env.TRIALS ?? 500) }), null, 2))
}
