// Suite: read-cache bookkeeping cost as pending writes grow (1k → 50k) with 10k cached entries.
// In a child over a fake Db: the times are the cache's own event-loop time per operation.
import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { withProgress } from '../progress.mjs'
import { ratio } from '../stats.mjs'

const run = promisify(execFile)
const worker = fileURLToPath(new URL('../cache-scale-worker.mjs', import.meta.url))
const PENDINGS = [1_000, 10_000, 50_000]

export async function cacheScaleSuite ({ cacheScaleOps = 2_000 }) {
  const args = [worker, JSON.stringify({ pendings: PENDINGS, entries: 10_000, ops: cacheScaleOps })]
  const { stdout } = await withProgress('cache scale: pending writes 1k → 50k', () => run(process.execPath, args, { timeout: 300_000, maxBuffer: 1 << 20 }))
  const rows = JSON.parse(stdout)
  const first = rows[0]
  const last = rows[rows.length - 1]
  const metrics = ['missByIdUs', 'missByEmailUs', 'hitUs', 'patchWriteUs', 'fieldWriteUs']
  const results = rows.map(r => ({
    key: `pending-${r.pending}`,
    name: `${r.pending.toLocaleString('en-US')} pending writes, ${r.entries.toLocaleString('en-US')} entries`,
    rate: Math.round(1e6 / r.missByEmailUs),
    p50Ms: null,
    p99Ms: null,
    dbCommandsPer1kWrites: 0,
    ...r,
  }))
  const ratios = {}
  for (const m of metrics) ratios[`${m.replace(/Us$/, '')}50kVs1k`] = ratio(last[m], first[m])
  return {
    title: 'Read cache: cost per operation as pending writes grow',
    unit: 'misses/s (by email)',
    latencyIs: 'µs of event-loop time per operation (fake Db: no I/O)',
    results,
    ratios,
    notes: [
      'fake Db in a child process: bulkWrite never answers (writes stay pending), findOne answers at once; so the times are the cache\'s own bookkeeping',
      'miss by _id / by email (the document found has no pending write), hit, a patching write by _id, a write by email (per-field index); ratios: 50k pending ÷ 1k pending (1 = flat)',
    ],
  }
}
