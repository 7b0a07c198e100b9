// Suite: the read cache's cost as its work grows (issue 24, items 3 and 4), over a stub Db
// whose bulkWrite and findOne answer after one setImmediate: CPU per operation of our own code
// (process.cpuUsage), in a child process, each printed as the ratio to its smallest case.
//   - a findOne through the cache (hit; miss found by _id; by email; not found) with 0 /
//     10,000 / 40,000 writes pending;
//   - waves of 1,000 / 40,000 writes, alone and with a read after every tenth write;
//   - updates by _id and inserts with 0 / 10,000 cached "not found" answers;
//   - inserts into a collection no read has asked about, with the cache on and off.
// Standalone: `npm run build && node bench/suites/scale-cache.mjs [--quick]` prints the table.
import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { withProgress } from '../progress.mjs'
import { ratio } from '../stats.mjs'

const run = promisify(execFile)
const worker = fileURLToPath(new URL('../scale-cache-worker.mjs', import.meta.url))
const PENDINGS = [0, 10_000, 40_000]
const WAVES = [1_000, 40_000]
const MISSES = [0, 10_000]

/**
 * Goals (ratios to the smallest case): a read at 40k pending, reads mixed in a 40k wave, writes
 * beside 10k cached misses; inserts into a collection no read has asked about, cache on ÷ off.
 */
export const SCALE_CACHE_GOALS = { read: 2, mixed: 1.5, misses: 1.3, writeOnly: 1.25 }

export async function scaleCacheSuite ({ scaleCacheReads = 2_000, scaleCacheWrites = 40_000, module } = {}) {
  const args = ['--expose-gc', worker, JSON.stringify({ module, reads: scaleCacheReads, writes: scaleCacheWrites, waves: WAVES, pendings: PENDINGS, misses: MISSES })]
  const { stdout } = await withProgress('cache at scale: pending writes, write waves, cached misses (stub Db)',
    () => run(process.execPath, args, { timeout: 900_000, maxBuffer: 1 << 20 }))
  const rows = JSON.parse(stdout)
  const reads = rows.filter(r => r.case === 'reads')
  const waves = rows.filter(r => r.case === 'waves')
  const misses = rows.filter(r => r.case === 'misses')
  const [r0, rN] = [reads[0], reads[reads.length - 1]]
  const [w0, wN] = [waves[0], waves[waves.length - 1]]
  const [m0, mN] = [misses[0], misses[misses.length - 1]]
  const writeOnly = rows.find(r => r.case === 'writeOnly')
  const k = n => n >= 1000 ? `${n / 1000}k` : String(n)
  const ratios = {
    [`readHit${k(rN.pending)}PendingVs${k(r0.pending)}`]: ratio(rN.hitUs, r0.hitUs),
    [`readMissById${k(rN.pending)}PendingVs${k(r0.pending)}`]: ratio(rN.missByIdUs, r0.missByIdUs),
    [`readMissByEmail${k(rN.pending)}PendingVs${k(r0.pending)}`]: ratio(rN.missByEmailUs, r0.missByEmailUs),
    [`readNotFound${k(rN.pending)}PendingVs${k(r0.pending)}`]: ratio(rN.notFoundUs, r0.notFoundUs),
    [`mixedVsAlone${k(w0.wave)}Wave`]: ratio(w0.mixedUs, w0.aloneUs),
    [`mixedVsAlone${k(wN.wave)}Wave`]: ratio(wN.mixedUs, wN.aloneUs),
    // how each grows with the wave: reads mixed in must not make writes grow faster than alone
    [`alone${k(wN.wave)}Vs${k(w0.wave)}Wave`]: ratio(wN.aloneUs, w0.aloneUs),
    [`mixed${k(wN.wave)}Vs${k(w0.wave)}Wave`]: ratio(wN.mixedUs, w0.mixedUs),
    [`update${k(mN.misses)}MissesVs${k(m0.misses)}`]: ratio(mN.updateUs, m0.updateUs),
    [`insert${k(mN.misses)}MissesVs${k(m0.misses)}`]: ratio(mN.insertUs, m0.insertUs),
    writeOnlyCacheOnVsOff: ratio(writeOnly.cacheOnUs, writeOnly.cacheOffUs),
  }
  const results = [
    ...reads.map(r => ({
      key: `reads-${r.pending}`,
      name: `findOne through the cache, ${r.pending.toLocaleString('en-US')} writes pending`,
      rate: Math.round(1e6 / r.missByEmailUs),
      details: `CPU µs per read: hit ${r.hitUs} (${ratio(r.hitUs, r0.hitUs)}x), miss by _id ${r.missByIdUs} (${ratio(r.missByIdUs, r0.missByIdUs)}x), ` +
        `miss by email ${r.missByEmailUs} (${ratio(r.missByEmailUs, r0.missByEmailUs)}x), not found ${r.notFoundUs} (${ratio(r.notFoundUs, r0.notFoundUs)}x)`,
    })),
    ...waves.map(r => ({
      key: `wave-${r.wave}`,
      name: `waves of ${r.wave.toLocaleString('en-US')} updates, a read after every tenth`,
      rate: Math.round(1e6 / r.mixedUs),
      details: `CPU µs per write: alone ${r.aloneUs} (${ratio(r.aloneUs, w0.aloneUs)}x), with reads ${r.mixedUs} (${ratio(r.mixedUs, w0.mixedUs)}x); with reads ÷ alone ${ratio(r.mixedUs, r.aloneUs)}`,
    })),
    ...misses.map(r => ({
      key: `misses-${r.misses}`,
      name: `writes beside ${r.misses.toLocaleString('en-US')} cached "not found" answers`,
      rate: Math.round(1e6 / r.updateUs),
      details: `CPU µs per write: update by _id ${r.updateUs} (${ratio(r.updateUs, m0.updateUs)}x), insert ${r.insertUs} (${ratio(r.insertUs, m0.insertUs)}x); entries ${r.entries} → ${r.entriesAfter}`,
    })),
    {
      key: 'write-only',
      name: 'inserts into a collection no read has asked about, read cache on',
      rate: Math.round(1e6 / writeOnly.cacheOnUs),
      details: `CPU µs per write: cache on ${writeOnly.cacheOnUs}, off ${writeOnly.cacheOffUs} (${ratios.writeOnlyCacheOnVsOff}x)`,
    },
  ].map(r => ({ p50Ms: null, p99Ms: null, dbCommandsPer1kWrites: null, ...r }))
  const met = ratios[`readMissByEmail${k(rN.pending)}PendingVs${k(r0.pending)}`] <= SCALE_CACHE_GOALS.read &&
    ratios[`readNotFound${k(rN.pending)}PendingVs${k(r0.pending)}`] <= SCALE_CACHE_GOALS.read &&
    ratios[`mixedVsAlone${k(wN.wave)}Wave`] <= SCALE_CACHE_GOALS.mixed &&
    ratios[`update${k(mN.misses)}MissesVs${k(m0.misses)}`] <= SCALE_CACHE_GOALS.misses &&
    ratios.writeOnlyCacheOnVsOff <= SCALE_CACHE_GOALS.writeOnly
  return {
    title: 'Read cache at scale: CPU per operation as pending writes, waves and cached misses grow (stub Db)',
    unit: 'ops/s (CPU)',
    latencyIs: 'not measured (CPU µs per operation, process.cpuUsage, least of several passes)',
    results,
    ratios,
    met,
    notes: [
      'with reads mixed in, each write also carries a tenth of a read that misses (a findOne the stub answers: several writes\' CPU), so their ratio to writes alone is above 1 at any wave size; what must not happen is its growth with the wave (mixed 40k ÷ 1k against alone 40k ÷ 1k)',
      'stub Db in a child process: bulkWrite and findOne answer after one setImmediate, so the CPU measured is our own code; for the reads the stub holds the pending writes until the reads are done',
      `goals: a read at ${k(rN.pending)} pending ≤ ${SCALE_CACHE_GOALS.read}x at ${k(r0.pending)}; writes with reads mixed in ≤ ${SCALE_CACHE_GOALS.mixed}x writes alone at ${k(wN.wave)}-write waves; writes with ${k(mN.misses)} cached misses ≤ ${SCALE_CACHE_GOALS.misses}x with none (cases measured in alternation on one heap); inserts into a collection no read has asked about ≤ ${SCALE_CACHE_GOALS.writeOnly}x with the cache off (its writes are kept unindexed until a read asks: cache/noted-writes.ts)`,
    ],
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const quick = process.argv.includes('--quick')
  const suite = await scaleCacheSuite(quick ? { scaleCacheReads: 500, scaleCacheWrites: 10_000 } : {})
  console.log(`### ${suite.title}\n`)
  for (const r of suite.results) console.log(`- ${r.name}: ${r.details}`)
  console.log(`\nRatios: ${Object.entries(suite.ratios).map(([key, v]) => `${key} ${v}`).join(', ')}`)
  console.log(`Goals met: ${suite.met ? 'yes' : 'NO'}`)
  for (const n of suite.notes) console.log(`- ${n}`)
}
