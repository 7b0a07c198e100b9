// What one scrypt hash costs on this machine, for the README's "Password cost" table:
//   node examples/fastify-app/scrypt-cost.mjs [--min-ms 3000] [--min-hashes 8]
// For N = 2^14 … 2^17 (r = 8, p = 1, a 64-byte key, as password.mjs hashes), each in a fresh
// Node process (so one N's memory does not count for the next), hashes run one at a time on one
// libuv thread, for at least --min-ms and --min-hashes each. Printed:
// - hashes per CPU-second: hashes ÷ the process's CPU time (user + system) meanwhile. This is
//   the per-core rate, and it holds on a machine shared with other work, where wall-clock
//   rates drop with every process competing for the cores;
// - hashes per wall-second, and how much of a core the run got (CPU time ÷ wall time);
// - memory per hash: OpenSSL's figure (128 * r * (N + p + 2) bytes) and the resident memory the
//   process grew by at its peak while hashing (sampled every 2 ms from the main thread).
import { execFileSync } from 'node:child_process'
import { cpus, loadavg } from 'node:os'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { hashPassword, memoryPerHash, scryptSettings } from './password.mjs'

const { values: args } = parseArgs({
  options: {
    'min-ms': { type: 'string', default: '3000' },
    'min-hashes': { type: 'string', default: '8' },
    only: { type: 'string' }, // internal: measure this log2(N) and print JSON
  },
})
const MIN_MS = Number(args['min-ms'])
const MIN_HASHES = Number(args['min-hashes'])
const MiB = 1024 * 1024

async function measure (logN) {
  const settings = scryptSettings({ logN, r: 8, p: 1 })
  await hashPassword('warm-up password', settings) // first-call allocations out of the timing
  const rssBefore = process.memoryUsage.rss()
  let rssPeak = rssBefore
  const sampler = setInterval(() => { rssPeak = Math.max(rssPeak, process.memoryUsage.rss()) }, 2)
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  let hashes = 0
  while (hashes < MIN_HASHES || performance.now() - t0 < MIN_MS) {
    await hashPassword(`password ${hashes}`, settings)
    hashes++
  }
  const wallMs = performance.now() - t0
  const cpu = process.cpuUsage(cpu0)
  clearInterval(sampler)
  const cpuMs = (cpu.user + cpu.system) / 1000
  return {
    N: `2^${logN}`,
    hashes,
    perCpuSecond: hashes / (cpuMs / 1000),
    perWallSecond: hashes / (wallMs / 1000),
    msPerHash: cpuMs / hashes,
    coreShare: cpuMs / wallMs,
    memoryMiB: memoryPerHash(settings) / MiB,
    rssGrowthMiB: (rssPeak - rssBefore) / MiB,
  }
}

if (args.only !== undefined) {
  process.stdout.write(JSON.stringify(await measure(Number(args.only))))
  process.exit(0)
}

const load = loadavg()
console.log(`# scrypt cost, r = 8, p = 1, 64-byte key · Node ${process.versions.node} · ${cpus().length} × ${cpus()[0]?.model ?? '?'}`)
console.log(`# load average before: ${load.map(l => l.toFixed(2)).join(' ')} · one hash at a time, ≥ ${MIN_HASHES} hashes and ≥ ${MIN_MS} ms per N`)
console.log('')
console.log('| N | hashes per CPU-second (one core) | CPU ms per hash | hashes per wall-second (core share) | memory per hash | peak RSS growth |')
console.log('| --- | ---: | ---: | ---: | ---: | ---: |')
for (const logN of [14, 15, 16, 17]) {
  const r = JSON.parse(execFileSync(process.execPath, [fileURLToPath(import.meta.url), '--only', String(logN), '--min-ms', String(MIN_MS), '--min-hashes', String(MIN_HASHES)], { encoding: 'utf8' }))
  console.log(`| ${r.N} | ${r.perCpuSecond.toFixed(1)} | ${r.msPerHash.toFixed(1)} | ${r.perWallSecond.toFixed(1)} (${Math.round(r.coreShare * 100)}%) | ${r.memoryMiB.toFixed(0)} MiB | ${r.rssGrowthMiB.toFixed(0)} MiB |`)
}
console.log('')
console.log(`# load average after: ${loadavg().map(l => l.toFixed(2)).join(' ')}`)
