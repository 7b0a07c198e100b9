// Suite: the API path against the raw driver (issue 26, item 4). N awaited insertOne calls through
// the buffer (product defaults) against the same N documents sent by hand as unordered
// bulkWrite(1000) with 1, 2 and 4 in flight: docs/s and the app's CPU per write
// (process.cpuUsage), one client each without command monitoring (it costs the driver CPU).
// Both sides get the same writes outstanding: raw k in flight keeps k × 1,000 out, so the buffer
// runs with 1,000, 2,000 and 4,000 awaited callers, and each side's best is compared, with the
// fastest buffered row's CPU per write against raw's leanest (a buffer held to 1,000 callers
// against raw rows keeping 4,000 out measures the callers, not the buffer). Also printed: each
// level against raw at the same level, and the 1,000-caller row against the fastest raw (the
// comparison before 2026-11-27) and against raw's fastest way of keeping 1,000 out (1,000 × 1,
// 500 × 2, 250 × 4). Every variant runs once to warm the JIT, then the rounds alternate, the
// cycle forwards and backwards in turn (6 kept rounds in the full run), so neither side is
// favoured by the JIT or by drift on a shared machine; each keeps its best round.
//   npm run build && MONGODB_URI=mongodb://… node bench/suites/api-path.mjs [writes] [rounds]
import { MongoClient } from 'mongodb'
import { WriteBuffer } from '../../dist/index.js'
import { smallDoc } from '../db.mjs'
import { withProgress } from '../progress.mjs'
import { ratio, round } from '../stats.mjs'

const RAW_BATCH = 1000
const RAW_IN_FLIGHT = [1, 2, 4]
/** the buffer's awaited callers: as many writes outstanding as raw keeps at each in-flight level */
const CALLER_LEVELS = RAW_IN_FLIGHT.map(k => k * RAW_BATCH)
/**
 * Raw bulkWrites with 1,000 documents outstanding split other ways than 1,000 × 1: 500 × 2 and
 * 250 × 4 in flight, for the 1,000-caller row.
 */
const RAW_SAME_OUTSTANDING = [{ batch: 500, inFlight: 2 }, { batch: 250, inFlight: 4 }]

/** Runs `work`; returns docs/s and app CPU µs per write over `writes` writes. */
async function measured (writes, work) {
  const t0 = performance.now()
  const c0 = process.cpuUsage()
  await work()
  const cpu = process.cpuUsage(c0)
  const s = (performance.now() - t0) / 1000
  return { rate: writes / s, cpuUsPerWrite: (cpu.user + cpu.system) / writes }
}

function bufferedRound (db, name, writes, callers) {
  return measured(writes, async () => {
    const wb = new WriteBuffer(db)
    const c = wb.collection(name)
    let next = 0
    const caller = async () => {
      for (let i = next++; i < writes; i = next++) await c.insertOne(smallDoc(i))
    }
    await Promise.all(Array.from({ length: callers }, caller))
    await wb.close()
  })
}

function rawRound (db, name, writes, inFlight, batchSize = RAW_BATCH) {
  const col = db.collection(name)
  return measured(writes, async () => {
    let next = 0
    const sender = async () => {
      for (let start = next; start < writes; start = next) {
        next = Math.min(writes, start + batchSize)
        const models = []
        for (let i = start; i < next; i++) models.push({ insertOne: { document: smallDoc(i) } })
        await col.bulkWrite(models, { ordered: false })
      }
    }
    await Promise.all(Array.from({ length: inFlight }, sender))
  })
}

export async function apiPathSuite ({ uri, apiPathWrites = 60_000, apiPathRounds = 6 }) {
  if (!(apiPathRounds >= 1)) throw new RangeError(`apiPathRounds must be at least 1, got ${apiPathRounds}`)
  const client = new MongoClient(uri)
  await client.connect()
  const db = client.db('fwb_bench_api_path')
  await db.dropDatabase()
  const variants = [
    ...CALLER_LEVELS.map(callers => ({ name: `WriteBuffer: ${apiPathWrites.toLocaleString('en-US')} awaited insertOne, ${callers.toLocaleString('en-US')} callers`, group: 'buffered', callers })),
    ...RAW_IN_FLIGHT.map(k => ({ name: `raw bulkWrite unordered, batch ${RAW_BATCH}, ${k} in flight`, group: 'raw', inFlight: k, batch: RAW_BATCH })),
    ...RAW_SAME_OUTSTANDING.map(({ batch, inFlight }) => ({ name: `raw bulkWrite unordered, batch ${batch}, ${inFlight} in flight (${RAW_BATCH.toLocaleString('en-US')} outstanding)`, group: 'split', inFlight, batch })),
  ]
  const best = new Map()
  let n = 0
  try {
    await withProgress('api path: buffered vs raw bulkWrite (warm-up, then alternating rounds)', async () => {
      for (let r = 0; r <= apiPathRounds; r++) { // round 0 warms the JIT and is not kept
        // kept rounds run the cycle forwards, then backwards (an even count balances them): no
        // variant always goes first (or last) while the machine drifts
        for (const v of r % 2 === 1 ? variants : [...variants].reverse()) {
          const name = `c${n++}`
          const row = v.group === 'buffered' ? await bufferedRound(db, name, apiPathWrites, v.callers) : await rawRound(db, name, apiPathWrites, v.inFlight, v.batch)
          await db.collection(name).drop().catch(() => {})
          if (r === 0) continue
          const b = best.get(v) ?? { rate: 0, cpuUsPerWrite: Infinity }
          best.set(v, { rate: Math.max(b.rate, row.rate), cpuUsPerWrite: Math.min(b.cpuUsPerWrite, row.cpuUsPerWrite) })
        }
      }
    })
  } finally {
    await client.close()
  }
  const results = variants.map(v => ({ name: v.name, group: v.group, rate: Math.round(best.get(v).rate), cpuUsPerWrite: round(best.get(v).cpuUsPerWrite, 2) }))
  const buffereds = results.filter(r => r.group === 'buffered') // 1,000 / 2,000 / 4,000 callers
  const raws = results.filter(r => r.group === 'raw') // 1 / 2 / 4 in flight
  // raw with 1,000 outstanding, as the 1,000-caller row: 1,000 × 1 and the splits
  const sameOutstanding = [raws[0], ...results.filter(r => r.group === 'split')]
  const fastest = rows => rows.reduce((a, b) => (b.rate > a.rate ? b : a))
  const fastestBuffered = fastest(buffereds)
  const fastestRaw = fastest(raws)
  const leanestRaw = raws.reduce((a, b) => (b.cpuUsPerWrite < a.cpuUsPerWrite ? b : a))
  const fastestSame = fastest(sameOutstanding)
  // each caller level against raw with as many writes outstanding (k × 1,000 callers ÷ 1,000 × k)
  const perLevel = Object.fromEntries(CALLER_LEVELS.map((callers, i) => [`buffered${callers}VsRaw${RAW_BATCH}x${RAW_IN_FLIGHT[i]}`, ratio(buffereds[i].rate, raws[i].rate)]))
  return {
    title: 'API path: awaited insertOne through the buffer vs raw unordered bulkWrite (warmed, alternating rounds)',
    unit: 'docs/s',
    latencyIs: 'not measured (docs/s and app CPU µs per write, process.cpuUsage)',
    results,
    ratios: {
      bufferedVsBestRaw: ratio(fastestBuffered.rate, fastestRaw.rate),
      // the same buffered row as the docs/s ratio: one setup has to meet both
      cpuPerWriteVsLeanestRaw: ratio(fastestBuffered.cpuUsPerWrite, leanestRaw.cpuUsPerWrite),
      ...perLevel,
      // the comparison this suite made before 2026-11-27 (and the held-out one): 1,000 callers ÷ the fastest raw
      callers1000VsBestRaw: ratio(buffereds[0].rate, fastestRaw.rate),
      bufferedVsBestRawSameOutstanding: ratio(buffereds[0].rate, fastestSame.rate),
    },
    notes: [
      `best of ${apiPathRounds} alternating rounds per variant after one warm-up round each, the cycle of variants run forwards and backwards in turn; each round writes to a new collection, dropped after it`,
      `each side at its best over the same writes outstanding (${CALLER_LEVELS.join('/')}): raw ${RAW_BATCH} documents per bulkWrite, ${RAW_IN_FLIGHT.join('/')} in flight (fastest: ${fastestRaw.name}; leanest CPU: ${leanestRaw.name}); the buffer with as many awaited callers (fastest: ${fastestBuffered.name}, whose CPU per write is the one compared); no command monitoring on either client`,
      `callers1000VsBestRaw: the ${CALLER_LEVELS[0]}-caller row ÷ the fastest raw (the comparison before 2026-11-27, and the issue's); bufferedVsBestRawSameOutstanding: the same row ÷ the fastest raw way of keeping ${RAW_BATCH} out (${fastestSame.name})`,
    ],
  }
}

if (process.argv[1] === new URL(import.meta.url).pathname) {
  const uri = process.env.MONGODB_URI ?? 'mongodb://127.0.0.1:27018/'
  const suite = await apiPathSuite({ uri, apiPathWrites: Number(process.argv[2] ?? 60_000), apiPathRounds: Number(process.argv[3] ?? 6) })
  console.table(suite.results)
  console.log(suite.ratios)
}
