// Self-time suite (issue 26, item 2): the library's own CPU per awaited write (insertOne,
// updateOne) against a stub Db whose bulkWrite answers after one setImmediate (no server, no
// driver: our code, plus the loop that awaits it). With --base <dir> (a checkout of another
// commit, built: its dist/) it measures both builds A/B in one run: alternating rounds, the
// order flipped each round, best round of each kept. The build step alone (write/build-op.js)
// is measured beside, in the same rounds: it is where the per-document checks live.
//   npm run build && node bench/suites/self-time.mjs [--base <dir>] [--rounds 7] [--writes 100000]
import { fileURLToPath, pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { fork } from 'node:child_process'
import { stubDb } from '../stub-db.mjs'

const CALLERS = 1000

/** The writes measured: the document / update of the HTTP suite's route, a new target each. */
export const CASES = {
  insertOne: (c, i) => c.insertOne({ user: 'u1', kind: 'click', value: i }),
  updateOne: (c, i) => c.updateOne({ _id: i }, { $set: { user: 'u1', kind: 'click', value: i } }),
}

/** CPU µs per write for `total` awaited writes of one case made by CALLERS concurrent loops. */
export async function cpuPerWrite (WriteBuffer, write, total) {
  const wb = new WriteBuffer(stubDb())
  const c = wb.collection('events')
  let next = 0
  const loop = async () => {
    for (let i = next++; i < total; i = next++) await write(c, i)
  }
  const t0 = process.cpuUsage()
  await Promise.all(Array.from({ length: CALLERS }, loop))
  const d = process.cpuUsage(t0)
  await wb.close()
  return (d.user + d.system) / total
}

/** The same writes' build step alone (validation, _id, size, target, the WriteOp): write/build-op.js. */
export const BUILD_CASES = {
  'buildInsert only': (m, i) => m.buildInsert({ user: 'u1', kind: 'click', value: i }, undefined, undefined),
  'buildUpdate only': (m, i) => m.buildUpdate(false, { _id: i }, { $set: { user: 'u1', kind: 'click', value: i } }, undefined),
}

/** CPU µs per call of one build case, `total` calls (the ops are dropped: GC counts). */
export function cpuPerBuild (buildOp, build, total) {
  let keep = null
  const t0 = process.cpuUsage()
  for (let i = 0; i < total; i++) keep = build(buildOp, i)
  const d = process.cpuUsage(t0)
  if (keep === null) throw new Error('nothing built')
  return (d.user + d.system) / total
}

/** Cases in print order. */
export const ALL_CASES = [...Object.keys(CASES), ...Object.keys(BUILD_CASES)]

/** Runs in a child process per build, so that neither build's code shares call sites (or JIT feedback) with the other. */
async function worker (dir) {
  const { WriteBuffer, buildOp } = await load(dir)
  const run = async (k, n) => k in CASES ? await cpuPerWrite(WriteBuffer, CASES[k], n) : cpuPerBuild(buildOp, BUILD_CASES[k], n)
  process.on('message', async ({ k, n }) => {
    process.send({ us: await run(k, n) })
  })
  process.send({ ready: true })
}

function startWorker (dir) {
  const child = fork(fileURLToPath(import.meta.url), ['--worker', dir], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  let waiting = null
  child.on('message', m => { const w = waiting; waiting = null; w?.(m) })
  const ask = msg => new Promise(resolve => { waiting = resolve; if (msg !== null) child.send(msg) })
  return { ready: ask(null), run: async (k, n) => (await ask({ k, n })).us, stop: () => child.kill() }
}

/**
 * Best (lowest) µs per write of each build × case over `rounds` alternating rounds; `builds`:
 * name → checkout directory (built: its dist/). Each build runs in its own process, warmed first.
 * `best[case + ' rounds']` lists each round's µs per build, for paired ratios.
 */
export async function measure (builds, { rounds = 7, writes = 100_000 } = {}) {
  const best = {}
  const names = Object.keys(builds)
  const workers = Object.fromEntries(names.map(b => [b, startWorker(builds[b])]))
  try {
    for (const b of names) await workers[b].ready
    for (const b of names) for (const k of ALL_CASES) await workers[b].run(k, writes / 2) // warm-up
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? names : [...names].reverse()
      for (const k of ALL_CASES) {
        for (const b of order) {
          const us = await workers[b].run(k, writes)
          const key = `${k} ${b}`
          if (!(best[key] <= us)) best[key] = us
          ;(best[`${k} rounds`] ??= []).push({ build: b, round: r, us })
        }
      }
    }
  } finally {
    for (const b of names) workers[b].stop()
  }
  return best
}

async function load (dir) {
  return {
    WriteBuffer: (await import(pathToFileURL(`${dir}/dist/core.js`).href)).WriteBuffer,
    buildOp: await import(pathToFileURL(`${dir}/dist/write/build-op.js`).href),
  }
}
const HERE = fileURLToPath(new URL('../..', import.meta.url))

export async function selfTimeSuite ({ selfTimeWrites = 100_000, selfTimeRounds = 5 } = {}) {
  const best = await measure({ this: HERE }, { rounds: selfTimeRounds, writes: selfTimeWrites })
  return {
    title: 'Library self time: CPU per awaited write against a stub Db (our code alone)',
    unit: 'writes/s (CPU)',
    latencyIs: 'not measured (CPU µs per write, process.cpuUsage)',
    results: ALL_CASES.map(k => ({ name: k, rate: Math.round(1e6 / best[`${k} this`]), usPerWrite: +best[`${k} this`].toFixed(2) })),
    notes: [`stub Db: bulkWrite answers after one setImmediate; ${CALLERS} callers await writes; best of ${selfTimeRounds} rounds of ${selfTimeWrites} writes`],
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv[2] === '--worker') {
  await worker(process.argv[3])
} else if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({ options: { base: { type: 'string' }, rounds: { type: 'string', default: '7' }, writes: { type: 'string', default: '100000' } } })
  const builds = { B: HERE }
  if (values.base !== undefined) builds.A = values.base
  const best = await measure(builds, { rounds: Number(values.rounds), writes: Number(values.writes) })
  const rows = ALL_CASES.map(k => {
    const row = { case: k, 'B µs/write': +best[`${k} B`].toFixed(3) }
    if (builds.A !== undefined) {
      row['A µs/write'] = +best[`${k} A`].toFixed(3)
      row['B/A'] = +(best[`${k} B`] / best[`${k} A`]).toFixed(3)
      // the same round's two measurements side by side: less exposed to a machine whose load drifts
      const rounds = best[`${k} rounds`]
      const paired = []
      for (let r = 0; r < Number(values.rounds); r++) {
        const of = b => rounds.find(x => x.round === r && x.build === b).us
        paired.push(of('B') / of('A'))
      }
      paired.sort((x, y) => x - y)
      row['B/A median of rounds'] = +paired[paired.length >> 1].toFixed(3)
    }
    return row
  })
  console.table(rows)
}
