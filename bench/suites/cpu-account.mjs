// Suite: a CPU account per HTTP request (issue 26, item 1). The no-DB, buffered and naive routes of
// the HTTP suite, each under autocannon at 100 connections; inside a window in the middle of each load
// (JIT warm, connections open) the machine's CPU is split into named components, in µs per request:
//   app process: Fastify + body handling, this library (dist/), the MongoDB driver, the bench's own
//     route code, node internals no JS caller of ours reached, GC, other main-thread time, and the
//     app's other threads — from a V8 CPU profile of the window (node:inspector, in process) whose
//     sample shares split the main thread's CPU as /proc counts it;
//   the server processes of MONGODB_URI (FerretDB/mongod + its PostgreSQL cluster, found by port),
//   the load generator, other processes on the machine (it is shared), and idle;
// the sum is checked against the wall-clock CPU (cores × seconds of the window).
//
// Standalone: npm run build && MONGODB_URI=mongodb://… node bench/suites/cpu-account.mjs [--quick]
//   (FWB_CPU_PROFILE_DIR=<dir> also writes each route's .cpuprofile there per round,
//   cpu-account-<route>-<round>.cpuprofile, for DevTools; with FWB_CPU_PERF=1 also a `perf record`
//   of the main thread's on-CPU samples, perf-<route>-<round>.data.)
import { execFile, execFileSync } from 'node:child_process'
import { readdirSync, readFileSync, readlinkSync } from 'node:fs'
import { mkdir, writeFile } from 'node:fs/promises'
import { Session } from 'node:inspector/promises'
import os from 'node:os'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import Fastify from 'fastify'
import { MongoClient, ObjectId } from 'mongodb'
import writeBuffer, { WriteBuffer } from '../../dist/index.js'
import { withProgress } from '../progress.mjs'
import { groupWait, stubDb } from '../stub-db.mjs'
import { ratio, round, sum } from '../stats.mjs'

const BODY = JSON.stringify({ user: 'u1', kind: 'click', value: 42 })
const CONNECTIONS = 100
const SAMPLING_INTERVAL_US = 1000
const ROOT_URL = new URL('../../', import.meta.url).href // file:///…/fastify-write-buffer/
const ROOT_DIR = fileURLToPath(ROOT_URL)
const WORKER = fileURLToPath(new URL('../load-worker.mjs', import.meta.url))

/** Components in print order; `app: true` rows add up to the app process. */
export const COMPONENTS = [
  { key: 'fastify', name: 'Fastify + body handling (fastify and its dependencies)', app: true },
  { key: 'library', name: 'this library (dist/)', app: true },
  { key: 'driver', name: 'MongoDB driver (mongodb, bson, their dependencies)', app: true },
  { key: 'bench', name: 'route handlers (bench code)', app: true },
  { key: 'nodeInternals', name: 'node internals, no JS caller (HTTP parser, sockets, timers, microtask loop)', app: true },
  { key: 'gc', name: 'GC on the main thread', app: true },
  { key: 'otherMain', name: 'other main-thread time (native, compiler, other packages)', app: true },
  { key: 'offMain', name: 'app threads other than main (GC helpers, compiler, libuv)', app: true },
  { key: 'profiler', name: 'profiler sampling thread (measurement overhead)', app: true },
  { key: 'server', name: 'server processes (FerretDB/mongod + PostgreSQL)' },
  { key: 'loadGen', name: 'load generator (autocannon)' },
  { key: 'otherProcs', name: 'other processes on the machine (shared)' },
  { key: 'idle', name: 'idle' },
]

/** Top self-time functions kept per component and round (12 are printed). */
const TOP_KEPT = 60

// ---------------------------------------------------------------- /proc readings (Linux only)

let clockTicks = 100
try { clockTicks = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100 } catch {}

function read (path) {
  try { return readFileSync(path, 'utf8') } catch { return null }
}

/** utime + stime of a process or thread, in seconds; null if gone or not Linux. */
function statCpuS (path) {
  const stat = read(path)
  if (stat === null) return null
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(f[11]) + Number(f[12])) / clockTicks
}

function statPpid (pid) {
  const stat = read(`/proc/${pid}/stat`)
  return stat === null ? null : Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
}

function pids () {
  try { return readdirSync('/proc').filter(e => /^\d+$/.test(e)).map(Number) } catch { return [] }
}

/** PID of the process listening on 127.0.0.1/0.0.0.0/:: TCP `port`, via /proc/net/tcp{,6} socket inodes. */
function listenerPid (port, candidates) {
  const hex = port.toString(16).toUpperCase().padStart(4, '0')
  const inodes = new Set()
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of (read(file) ?? '').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/)
      if (f.length > 9 && f[1].endsWith(`:${hex}`) && f[3] === '0A') inodes.add(f[9])
    }
  }
  for (const pid of candidates) {
    let fds
    try { fds = readdirSync(`/proc/${pid}/fd`) } catch { continue }
    for (const fd of fds) {
      let target
      try { target = readlinkSync(`/proc/${pid}/fd/${fd}`) } catch { continue }
      const m = /^socket:\[(\d+)\]$/.exec(target)
      if (m !== null && inodes.has(m[1])) return pid
    }
  }
  return null
}

const comm = pid => (read(`/proc/${pid}/comm`) ?? '').trim()
const isServerComm = c => c.startsWith('ferretdb') || c === 'postgres' || c === 'mongod' || c === 'mongos'

/**
 * The server processes behind `uri` only (other agents run servers on this machine too): the
 * process listening on the URI's port; if it is FerretDB, the PostgreSQL cluster its
 * --postgresql-url names (postmaster found by port) and all the postmaster's children.
 * `refresh()` re-reads the children (backends come and go).
 */
function serverOf (uri) {
  const port = Number(new URL(uri.replace(/^mongodb(\+srv)?:/, 'http:')).port || 27017)
  const candidates = pids().filter(p => isServerComm(comm(p)))
  const front = listenerPid(port, candidates)
  if (front === null) return null
  let postmaster = null
  if (comm(front).startsWith('ferretdb')) {
    const args = (read(`/proc/${front}/cmdline`) ?? '').split('\0')
    const pgArg = args.find(a => a.startsWith('--postgresql-url='))
    const pgPort = pgArg === undefined ? 5432 : Number(new URL(pgArg.slice('--postgresql-url='.length)).port || 5432)
    postmaster = listenerPid(pgPort, candidates)
  }
  const all = () => {
    const out = [front]
    if (postmaster !== null) {
      out.push(postmaster)
      for (const p of pids()) if (statPpid(p) === postmaster) out.push(p)
    }
    return out
  }
  return { front, postmaster, all }
}

/** CPU of V8's profiler threads (v8:ProfEvntProc): what measuring costs, kept apart from the app. */
function profilerThreadsCpuS () {
  let tids
  try { tids = readdirSync('/proc/self/task') } catch { return null }
  let s = 0
  for (const t of tids) if ((read(`/proc/self/task/${t}/comm`) ?? '').startsWith('v8:Prof')) s += statCpuS(`/proc/self/task/${t}/stat`) ?? 0
  return s
}

function machineTicks () {
  const line = read('/proc/stat')?.split('\n')[0]
  if (line === undefined) return null
  const cpu = line.trim().split(/\s+/).slice(1).map(Number)
  return { idle: cpu[3] + cpu[4], total: cpu.reduce((a, b) => a + b, 0) }
}

/** One reading of everything the account needs; `diff(a, b)` gives CPU seconds per component. */
function reading (server, loadGenPid) {
  const u = process.cpuUsage()
  const serverPids = server === null ? [] : server.all()
  return {
    at: performance.now(),
    appS: (u.user + u.system) / 1e6,
    mainS: statCpuS(`/proc/${process.pid}/task/${process.pid}/stat`),
    profilerS: profilerThreadsCpuS(),
    server: new Map(serverPids.map(p => [p, statCpuS(`/proc/${p}/stat`)])),
    loadGenS: statCpuS(`/proc/${loadGenPid}/stat`),
    machine: machineTicks(),
  }
}

function diff (a, b) {
  let serverS = 0
  for (const [pid, after] of b.server) {
    const before = a.server.get(pid) ?? 0 // a backend born inside the window counts from 0
    if (after !== null && before !== null) serverS += after - before
  }
  const m = a.machine !== null && b.machine !== null
    ? { totalS: (b.machine.total - a.machine.total) / clockTicks, idleS: (b.machine.idle - a.machine.idle) / clockTicks }
    : null
  return {
    wallS: (b.at - a.at) / 1000,
    appS: b.appS - a.appS,
    mainS: a.mainS === null || b.mainS === null ? null : b.mainS - a.mainS,
    profilerS: a.profilerS === null || b.profilerS === null ? null : b.profilerS - a.profilerS,
    serverS: a.server.size === 0 ? null : serverS,
    loadGenS: a.loadGenS === null || b.loadGenS === null ? null : b.loadGenS - a.loadGenS,
    machine: m,
  }
}

// ---------------------------------------------------------------- profile attribution

function packageName (url) {
  const i = url.lastIndexOf('node_modules/')
  if (i < 0) return null
  const parts = url.slice(i + 'node_modules/'.length).split('/')
  return parts[0].startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]
}

/** `name` and every package it depends on (flat node_modules of this checkout). */
function dependencyTree (name, into = new Set()) {
  if (into.has(name)) return into
  into.add(name)
  const pkg = read(join(ROOT_DIR, 'node_modules', name, 'package.json'))
  if (pkg === null) return into
  for (const dep of Object.keys(JSON.parse(pkg).dependencies ?? {})) dependencyTree(dep, into)
  return into
}

const DRIVER = dependencyTree('mongodb')
const FASTIFY = dependencyTree('fastify')
for (const d of DRIVER) FASTIFY.delete(d) // none today; the driver wins if they ever share one

/** libuv stream writes as V8 sees them (native): the write syscall, on loopback the peer's TCP receive too */
const SOCKET_WRITES = new Set(['writev', 'writeBuffer', 'writeUtf8String', 'writeLatin1String', 'writeAsciiString', 'writeUcs2String'])

/** A frame's own component, or null when it belongs to whoever called it (node:, native, unnamed). */
function ownComponent (frame) {
  const { url, functionName } = frame
  if (functionName === '(garbage collector)') return 'gc'
  if (functionName === '(idle)') return 'idle'
  if (functionName === '(program)') return 'otherMain'
  if (functionName === '(root)') return 'nodeInternals'
  if (url === '' || url.startsWith('node:')) return null
  const pkg = packageName(url)
  if (pkg !== null) return DRIVER.has(pkg) ? 'driver' : FASTIFY.has(pkg) ? 'fastify' : 'otherMain'
  if (url.startsWith(`${ROOT_URL}dist/`) || url.startsWith(`${ROOT_URL}src/`)) return 'library'
  if (url.startsWith(`${ROOT_URL}bench/`)) return 'bench'
  return 'otherMain'
}

/**
 * Self-time samples per component. Node internals and native frames (JSON.parse, Promise
 * plumbing, node:net writes…) go to their nearest caller that is ours, Fastify's, the driver's
 * or the bench's; with no such caller they stay 'nodeInternals'. Also returns the strict
 * split (node:/native self time on its own) and the top self-time functions per component.
 */
export function attribute (profile) {
  // (kept beyond the 12 printed, so that rounds merged still rank a function by all its samples)
  const byId = new Map(profile.nodes.map(n => [n.id, n]))
  const parent = new Map()
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id)
  const resolved = new Map()
  const componentOf = id => {
    if (resolved.has(id)) return resolved.get(id)
    const own = ownComponent(byId.get(id).callFrame)
    const p = parent.get(id)
    const c = own ?? (p === undefined ? 'nodeInternals' : componentOf(p))
    resolved.set(id, c)
    return c
  }
  const samples = {}
  const socketWrites = {}
  let nodeOrNative = 0
  const functions = new Map()
  for (const id of profile.samples) {
    const c = componentOf(id)
    samples[c] = (samples[c] ?? 0) + 1
    const f = byId.get(id).callFrame
    if (ownComponent(f) === null) nodeOrNative++
    if (f.url === '' && SOCKET_WRITES.has(f.functionName)) socketWrites[c] = (socketWrites[c] ?? 0) + 1
    const where = f.url.startsWith(ROOT_URL) ? f.url.slice(ROOT_URL.length) : f.url.replace(/^.*node_modules\//, '')
    const key = `${c}\t${f.functionName || '(anonymous)'} ${where}:${f.lineNumber + 1}`
    functions.set(key, (functions.get(key) ?? 0) + 1)
  }
  const top = {}
  for (const [key, n] of [...functions].sort((a, b) => b[1] - a[1])) {
    const [c, fn] = key.split('\t')
    if ((top[c] ??= []).length < TOP_KEPT) top[c].push({ fn, samples: n })
  }
  return { samples, socketWrites, total: profile.samples.length, nodeOrNative, top }
}

// ---------------------------------------------------------------- perf cross-check (optional)

const PERF_GC = /v8::internal::(Heap::(Collect|Perform)|Scavenge|MarkCompact|MinorMarkCompact|MinorMS|IncrementalMarking|ConcurrentMarking|Sweeper)/
const PERF_SIGNAL = /SignalHandler|HandleProfilerSignal|x64_setup_rt_frame|arch_do_signal_or_restart|restore_sigcontext|__restore_rt/
const PERF_SOCKET_WRITE = /do_writev|sock_write_iter|tcp_sendmsg|__x64_sys_write/

/**
 * The main thread's on-CPU samples from `perf record` (cpu-clock counts only running time, so
 * no preemption bias), split by the same rules: the nearest JS frame (perf map of
 * --perf-basic-prof) that belongs to a component; GC and the V8 profiler's own SIGPROF handling
 * by their native frames. Shares of the samples, in %. Null when perf script fails.
 */
function perfSplit (dataFile) {
  let out
  try { out = execFileSync('perf', ['script', '-i', dataFile, '-F', 'ip,sym'], { maxBuffer: 1 << 30, stdio: ['ignore', 'pipe', 'ignore'] }).toString() } catch { return null }
  const counts = {}
  const socketWrites = {}
  let total = 0
  let jsFrames = 0
  for (const block of out.split(/\n\s*\n/)) {
    const syms = block.split('\n').map(l => l.trim().replace(/^[0-9a-f]+ /, '')).filter(Boolean)
    if (syms.length === 0) continue
    total++
    let c = null
    if (syms.some(x => PERF_SIGNAL.test(x))) c = 'profiler'
    else if (syms.some(x => PERF_GC.test(x))) c = 'gc'
    else {
      for (const x of syms) {
        const m = /^(?:JS|Eval|Function|LazyCompile):\S*\s*(?:\S*\s)?(\S+):\d+:\d+$/.exec(x)
        if (m === null) continue
        jsFrames++
        const url = m[1].startsWith('/') ? pathToFileURL(m[1]).href : m[1]
        const own = ownComponent({ url, functionName: 'js' })
        if (own !== null) { c = own; break }
      }
      c ??= 'nodeInternals'
    }
    counts[c] = (counts[c] ?? 0) + 1
    if (syms.some(x => PERF_SOCKET_WRITE.test(x))) socketWrites[c] = (socketWrites[c] ?? 0) + 1
  }
  if (total === 0) return null
  const pct = o => Object.fromEntries(Object.entries(o).map(([k, n]) => [k, round((100 * n) / total, 1)]))
  return { samples: total, withJsFrames: jsFrames > 0, pct: pct(counts), socketWritePct: pct(socketWrites) }
}

// ---------------------------------------------------------------- one route

function startLoad (url, durationS) {
  let child
  const done = new Promise((resolve, reject) => {
    child = execFile(process.execPath, [WORKER, JSON.stringify({ url, connections: CONNECTIONS, durationS, body: BODY })],
      { timeout: (durationS + 60) * 1000 }, (err, stdout) => (err ? reject(err) : resolve(JSON.parse(stdout))))
  })
  return { pid: child.pid, done }
}

async function measureRoute ({ base, route, pass, counts, server, warmS, windowS, profileDir, stats }) {
  const session = new Session()
  session.connect()
  await session.post('Profiler.enable')
  await session.post('Profiler.setSamplingInterval', { interval: SAMPLING_INTERVAL_US })
  counts.first = null
  const load = startLoad(`${base}/${route}`, Math.ceil(warmS + windowS + 1))
  // the window opens warmS after the first request arrived, and closes windowS later, before the load stops
  while (counts.first === null) await new Promise(resolve => setTimeout(resolve, 5))
  await new Promise(resolve => setTimeout(resolve, Math.max(0, warmS * 1000 - (performance.now() - counts.first))))
  await session.post('Profiler.start')
  // optional cross-check: on-CPU samples of the main thread from perf (kernel stacks included)
  let perf = null
  if (profileDir && process.env.FWB_CPU_PERF === '1') {
    await mkdir(profileDir, { recursive: true })
    const child = execFile('perf', ['record', '-q', '-e', 'cpu-clock', '-F', '999', '-g', '-t', String(process.pid), '-o', join(profileDir, `perf-${route}-${pass}.data`)], () => {})
    perf = { child, exited: new Promise(resolve => child.once('exit', resolve)) }
  }
  const before = reading(server, load.pid)
  const requestsBefore = counts[route]
  const statsBefore = stats()
  await new Promise(resolve => setTimeout(resolve, windowS * 1000))
  const after = reading(server, load.pid)
  if (perf !== null) {
    perf.child.kill('SIGINT')
    await perf.exited
  }
  const requests = counts[route] - requestsBefore
  const statsAfter = stats()
  const batches = statsAfter.batches - statsBefore.batches
  const ops = statsAfter.flushedOps - statsBefore.flushedOps
  const avgBatch = batches === 0 ? null : round(ops / batches, 1)
  const { profile } = await session.post('Profiler.stop')
  await session.post('Profiler.disable')
  session.disconnect()
  const loadResult = await load.done
  if (profileDir) {
    await mkdir(profileDir, { recursive: true })
    await writeFile(join(profileDir, `cpu-account-${route}-${pass}.cpuprofile`), JSON.stringify(profile))
  }
  const perfPct = perf === null ? null : perfSplit(join(profileDir, `perf-${route}-${pass}.data`))
  return { requests, batches, ops, avgBatch, perfPct, cpu: diff(before, after), attribution: attribute(profile), load: loadResult }
}

/** Sums of two objects of counts, key by key. */
function addCounts (a, b) {
  const out = { ...a }
  for (const [k, n] of Object.entries(b)) out[k] = (out[k] ?? 0) + n
  return out
}

/**
 * One route's rounds as one measurement: requests, CPU and profile samples add up (so a round
 * counts by its length); the latency is the worse round's.
 */
function merged (a, b) {
  if (a === undefined) return b
  const add = (x, y) => (x === null || y === null ? null : x + y)
  const batches = a.batches + b.batches
  const ops = a.ops + b.ops
  const top = {}
  for (const c of new Set([...Object.keys(a.attribution.top), ...Object.keys(b.attribution.top)])) {
    const byFn = new Map()
    for (const { fn, samples } of [...(a.attribution.top[c] ?? []), ...(b.attribution.top[c] ?? [])]) byFn.set(fn, (byFn.get(fn) ?? 0) + samples)
    top[c] = [...byFn].sort((x, y) => y[1] - x[1]).slice(0, TOP_KEPT).map(([fn, samples]) => ({ fn, samples }))
  }
  const perfOf = (x, y) => {
    if (x === null || y === null) return x ?? y
    const n = x.samples + y.samples
    const mix = (p, q) => Object.fromEntries([...new Set([...Object.keys(p), ...Object.keys(q)])].map(k => [k, round(((p[k] ?? 0) * x.samples + (q[k] ?? 0) * y.samples) / n, 1)]))
    return { samples: n, withJsFrames: x.withJsFrames || y.withJsFrames, pct: mix(x.pct, y.pct), socketWritePct: mix(x.socketWritePct, y.socketWritePct) }
  }
  return {
    requests: a.requests + b.requests,
    batches,
    ops,
    avgBatch: batches === 0 ? null : round(ops / batches, 1),
    perfPct: perfOf(a.perfPct, b.perfPct),
    cpu: {
      wallS: a.cpu.wallS + b.cpu.wallS,
      appS: a.cpu.appS + b.cpu.appS,
      mainS: add(a.cpu.mainS, b.cpu.mainS),
      profilerS: add(a.cpu.profilerS, b.cpu.profilerS),
      serverS: add(a.cpu.serverS, b.cpu.serverS),
      loadGenS: add(a.cpu.loadGenS, b.cpu.loadGenS),
      machine: a.cpu.machine === null || b.cpu.machine === null ? null : { totalS: a.cpu.machine.totalS + b.cpu.machine.totalS, idleS: a.cpu.machine.idleS + b.cpu.machine.idleS },
    },
    attribution: {
      samples: addCounts(a.attribution.samples, b.attribution.samples),
      socketWrites: addCounts(a.attribution.socketWrites, b.attribution.socketWrites),
      total: a.attribution.total + b.attribution.total,
      nodeOrNative: a.attribution.nodeOrNative + b.attribution.nodeOrNative,
      top,
    },
    load: { ...b.load, p50Ms: Math.max(a.load.p50Ms, b.load.p50Ms), p99Ms: Math.max(a.load.p99Ms, b.load.p99Ms) },
  }
}

/** µs per request of each component, from one route's readings. */
function account ({ requests, cpu, attribution }, cores) {
  const us = s => (s === null || requests === 0 ? null : round((s * 1e6) / requests, 1))
  const { samples } = attribution
  const busy = Object.entries(samples).filter(([c]) => c !== 'idle').reduce((a, [, n]) => a + n, 0)
  const mainS = cpu.mainS ?? cpu.appS // without /proc: the whole process stands in for the main thread
  const out = {}
  const ofMain = n => us(busy === 0 ? 0 : (mainS * n) / busy)
  for (const c of COMPONENTS.filter(c => c.app && c.key !== 'offMain' && c.key !== 'profiler')) out[c.key] = us(busy === 0 ? 0 : (mainS * (samples[c.key] ?? 0)) / busy)
  out.profiler = us(cpu.profilerS)
  out.offMain = us(cpu.mainS === null ? null : cpu.appS - cpu.mainS - (cpu.profilerS ?? 0))
  out.server = us(cpu.serverS)
  out.loadGen = us(cpu.loadGenS)
  const wallCpuS = cores * cpu.wallS
  if (cpu.machine !== null) {
    const busyS = cpu.machine.totalS - cpu.machine.idleS
    out.otherProcs = us(Math.max(0, busyS - cpu.appS - (cpu.serverS ?? 0) - (cpu.loadGenS ?? 0)))
    out.idle = us(cpu.machine.idleS)
  } else {
    out.otherProcs = null
    out.idle = null
  }
  const sum = COMPONENTS.reduce((a, c) => a + (out[c.key] ?? 0), 0)
  return {
    us: out,
    socketWriteUs: Object.fromEntries(Object.entries(attribution.socketWrites).map(([c, n]) => [c, ofMain(n)])),
    appUs: us(cpu.appS),
    sumUs: round(sum, 1),
    wallCpuUs: us(wallCpuS),
    sumVsWallCpu: ratio(sum, (wallCpuS * 1e6) / requests),
    // shares of the app process's CPU without the profiler thread (the app as it runs unmeasured)
    appPct: Object.fromEntries(COMPONENTS.filter(c => c.app).map(c => [c.key, out[c.key] === null ? null : round((100 * out[c.key]) / (((cpu.appS - (cpu.profilerS ?? 0)) * 1e6) / requests), 1)])),
  }
}

// ---------------------------------------------------------------- the driver alone

/** How the floor sends a batch: the call this library makes, and the cheapest the driver has. */
const FLOOR_WAYS = [
  {
    key: 'floorBulkWrite',
    name: 'driver alone: bulkWrite',
    // the Sender's call: unordered insertOne models, maxTimeMS (the buffer's default), no serializeFunctions
    send: (db, coll, docs) => coll.bulkWrite(docs.map(document => ({ insertOne: { document } })), { ordered: false, maxTimeMS: 5000, serializeFunctions: false }),
  },
  {
    key: 'floorInsertCommand',
    name: 'driver alone: insert command',
    // one insert command through db.command: no bulk layer, no _id map, no BulkWriteResult
    send: (db, coll, docs) => db.command({ insert: coll.collectionName, documents: docs, ordered: false, maxTimeMS: 5000 }),
  },
]

/**
 * The driver with no library and no HTTP in front: batches of `batch` documents (the buffered
 * route's average writes per bulkWrite in its window) made as the route makes them, with the
 * ObjectId _id the buffer gives each, `inFlight` commands at a time, profiled like a route.
 * Its "driver" row is what the driver's calls cost per write at this load's batch size, below
 * anything this library can do while it sends through them.
 */
async function measureFloor ({ db, way, batch, inFlight, warmS, windowS, server, profileDir }) {
  const coll = db.collection(`floor_${way.key}`)
  const docs = () => {
    const out = new Array(batch)
    for (let i = 0; i < batch; i++) out[i] = { user: 'u1', kind: 'click', value: 42, at: new Date(), _id: new ObjectId() }
    return out
  }
  let writes = 0
  const run = { stop: false }
  const loops = Array.from({ length: inFlight }, async () => {
    while (!run.stop) {
      await way.send(db, coll, docs())
      writes += batch
    }
  })
  const session = new Session()
  session.connect()
  await session.post('Profiler.enable')
  await session.post('Profiler.setSamplingInterval', { interval: SAMPLING_INTERVAL_US })
  try {
    await new Promise(resolve => setTimeout(resolve, warmS * 1000))
    await session.post('Profiler.start')
    const before = reading(server, null)
    const writesBefore = writes
    await new Promise(resolve => setTimeout(resolve, windowS * 1000))
    const after = reading(server, null)
    const requests = writes - writesBefore
    const { profile } = await session.post('Profiler.stop')
    if (profileDir) {
      await mkdir(profileDir, { recursive: true })
      await writeFile(join(profileDir, `cpu-account-${way.key}.cpuprofile`), JSON.stringify(profile))
    }
    return { requests, batches: Math.round(requests / batch), avgBatch: batch, cpu: diff(before, after), attribution: attribute(profile), load: { p50Ms: '—', p99Ms: '—' } }
  } finally {
    run.stop = true
    await Promise.all(loops)
    await session.post('Profiler.disable')
    session.disconnect()
    await coll.drop().catch(() => {})
  }
}

// ---------------------------------------------------------------- the suite

/** Commands in flight in the driver-alone rows: the buffered route at 100 connections alternates about two batches. */
const FLOOR_IN_FLIGHT = 2

const ROUTES = [
  { key: 'noop', name: 'no-DB' },
  { key: 'buffered', name: 'buffered' },
  { key: 'inProcess', name: 'buffered, in-process server' },
  { key: 'gate', name: 'group wait, no library' },
  { key: 'gate2', name: 'group wait, 2 out, no library' },
  { key: 'naive', name: 'naive' },
]

/** The in-process server's round trip before the buffered route has measured one (warm-up only). */
const IN_PROCESS_WARM_UP_MS = 3

/**
 * `durationS`: seconds of load per route; the first third (≤ 2 s) warms up, the rest is measured.
 * `accountRounds`: the routes are measured this many times, in turn, the order reversed every other
 * round (the machine's speed drifts: a route measured in one window of its own was 0.48-0.67 of
 * the no-DB route over five runs); each round warms up again and measures its share of the window.
 * `jitWarmS`: seconds of untimed load on every route before any is measured: a route measured
 * 1-2 s into its first load was still compiling (the app's other threads, mostly the JIT's,
 * spent 700 ms of 3 s 1-4 s into a buffered load, 80-300 ms from 8 s on).
 */
export async function cpuAccountSuite ({ uri, durationS, jitWarmS = 0, accountRounds: rounds = 2 }) {
  const warmS = Math.min(2, durationS / 3)
  const windowS = durationS - warmS
  const roundS = windowS / rounds
  const cores = os.cpus().length
  const server = serverOf(uri)
  // no command monitoring (the other suites count commands with it; here it would add driver CPU)
  const client = new MongoClient(uri)
  await client.connect()
  const db = client.db('fwb_bench_cpu_account')
  await db.dropDatabase()
  const app = Fastify({ logger: false })
  await app.register(writeBuffer, { db, maxBatchSize: 1000 })
  // the buffered route again over a server that answers each batch after the buffered route's
  // own round trip (its median, from the buffer's stats) and costs no CPU (no driver, no socket):
  // the same batching, promises and settling, so buffered − in-process is what the driver and
  // the server's socket cost the app
  const roundTrip = { ms: IN_PROCESS_WARM_UP_MS, achievedMs: 0 }
  const followBuffered = () => {
    const { p50 } = app.writeBuffer.stats().roundTripMs
    if (p50 > 0) roundTrip.ms = p50
  }
  const inProcess = new WriteBuffer(stubDb({ answerAfterMs: () => roundTrip.ms }), { maxBatchSize: 1000 })
  // and handlers that wait the same way with no library: one batch out (two), the same round trip
  const gates = { gate: groupWait({ answerAfterMs: () => roundTrip.ms }), gate2: groupWait({ answerAfterMs: () => roundTrip.ms, inFlight: 2 }) }
  const counts = { first: null, noop: 0, buffered: 0, inProcess: 0, gate: 0, gate2: 0, naive: 0 }
  const doc = body => ({ ...body, at: new Date() })
  const seen = () => { if (counts.first === null) counts.first = performance.now() }
  app.post('/noop', async (req, reply) => {
    seen()
    counts.noop++
    return reply.code(201).send({ ok: true })
  })
  app.post('/buffered', async (req, reply) => {
    seen()
    await app.writeBuffer.collection('buffered').insertOne(doc(req.body))
    counts.buffered++
    return reply.code(201).send({ ok: true })
  })
  app.post('/inProcess', async (req, reply) => {
    seen()
    await inProcess.collection('buffered').insertOne(doc(req.body))
    counts.inProcess++
    return reply.code(201).send({ ok: true })
  })
  for (const key of ['gate', 'gate2']) {
    app.post(`/${key}`, async (req, reply) => {
      seen()
      await gates[key].wait(doc(req.body))
      counts[key]++
      return reply.code(201).send({ ok: true })
    })
  }
  app.post('/naive', async (req, reply) => {
    seen()
    await db.collection('naive').insertOne(doc(req.body))
    counts.naive++
    return reply.code(201).send({ ok: true })
  })
  const base = await app.listen({ host: '127.0.0.1', port: 0 })
  const profileDir = process.env.FWB_CPU_PROFILE_DIR || null
  const measured = {}
  const loadAvg = []
  let floorBatch = 1
  const bufferOf = key => (key === 'inProcess' ? inProcess : key in gates ? { flush: async () => {}, stats: gates[key].stats } : app.writeBuffer)
  try {
    if (jitWarmS > 0) {
      for (const r of ROUTES) {
        await withProgress(`cpu account: warm-up, ${r.name}`, () => startLoad(`${base}/${r.key}`, jitWarmS).done, jitWarmS * 1000)
        await bufferOf(r.key).flush()
        if (r.key === 'buffered') followBuffered()
      }
    }
    for (let n = 0; n < rounds; n++) {
      for (const r of n % 2 === 0 ? ROUTES : [...ROUTES].reverse()) {
        loadAvg.push(round(os.loadavg()[0], 2))
        const m = await withProgress(`cpu account: ${r.name}, round ${n + 1} of ${rounds}`, () => measureRoute({ base, route: r.key, pass: n + 1, counts, server, warmS, windowS: roundS, profileDir, stats: () => bufferOf(r.key).stats() }), (warmS + roundS + 1.5) * 1000)
        measured[r.key] = merged(measured[r.key], m)
        await bufferOf(r.key).flush()
        // the in-process rows of every round run at the first round's (the one reported)
        if (r.key === 'buffered' && n === 0) followBuffered()
        // read now: the stats' window (one to two minutes) would have moved past it by the end
        if (r.key === 'inProcess') roundTrip.achievedMs = inProcess.stats().roundTripMs.p50
      }
    }
    // the driver alone at the batch size the buffered route produced
    floorBatch = Math.max(1, Math.round(measured.buffered.avgBatch ?? 1))
    for (const way of FLOOR_WAYS) {
      measured[way.key] = await withProgress(`cpu account: ${way.name} of ${floorBatch}`,
        () => measureFloor({ db, way, batch: floorBatch, inFlight: FLOOR_IN_FLIGHT, warmS, windowS, server, profileDir }), (warmS + windowS + 1.5) * 1000)
    }
  } finally {
    try {
      await app.close()
    } finally {
      try {
        await inProcess.close()
      } finally {
        await client.close()
      }
    }
  }
  const accounts = Object.fromEntries([...ROUTES, ...FLOOR_WAYS].map(r => [r.key, account(measured[r.key], cores)]))
  const rowOf = r => {
    const m = measured[r.key]
    const a = accounts[r.key]
    return {
      key: r.key,
      name: r.name,
      rate: round(m.requests / m.cpu.wallS),
      p50Ms: m.load.p50Ms,
      p99Ms: m.load.p99Ms,
      dbCommandsPer1kWrites: null,
      requestsInWindow: m.requests,
      bulkWritesInWindow: m.batches,
      avgBatch: m.avgBatch,
      windowS: round(m.cpu.wallS, 2),
      ...a,
      profileSamples: m.attribution.total,
      nodeOrNativeSelfPct: round((100 * m.attribution.nodeOrNative) / Math.max(1, m.attribution.total - (m.attribution.samples.idle ?? 0)), 1),
      idleMainPct: round((100 * (m.attribution.samples.idle ?? 0)) / Math.max(1, m.attribution.total), 1),
      top: m.attribution.top,
      // main thread's on-CPU split from perf (FWB_CPU_PERF=1), % of its samples
      perf: m.perfPct,
      // the same split from the V8 profile, % of the main thread's CPU, for comparison
      v8MainPct: Object.fromEntries(['fastify', 'library', 'driver', 'bench', 'nodeInternals', 'gc', 'otherMain'].map(k => [k, round((100 * (accounts[r.key].us[k] ?? 0)) / Math.max(1e-9, ['fastify', 'library', 'driver', 'bench', 'nodeInternals', 'gc', 'otherMain'].reduce((a, j) => a + (accounts[r.key].us[j] ?? 0), 0)), 1)])),
    }
  }
  const results = ROUTES.map(rowOf)
  const floor = FLOOR_WAYS.map(w => ({ ...rowOf({ key: w.key, name: `${w.name} of ${floorBatch}, ${FLOOR_IN_FLIGHT} in flight (µs per write)` }), batch: floorBatch, inFlight: FLOOR_IN_FLIGHT }))
  const table = accountTable([...results, ...floor])
  const { noop, buffered, inProcess: inProcessRow, gate: gateRow, gate2: gate2Row, naive } = Object.fromEntries(results.map(r => [r.key, r]))
  const { floorBulkWrite, floorInsertCommand } = Object.fromEntries(floor.map(r => [r.key, r]))
  const bound = boundOf({ noop, buffered, floorInsertCommand }, cores)
  return {
    title: 'CPU account per request (100 connections)',
    unit: 'req/s',
    latencyIs: `per HTTP request (autocannon, ${CONNECTIONS} connections, whole load run)`,
    durationS,
    results,
    floor,
    table,
    ratios: {
      bufferedVsNoDb: ratio(buffered.rate, noop.rate),
      bufferedAppCpuVsNoDb: ratio(buffered.appUs, noop.appUs),
      bufferedLibraryPlusDriverUs: round((buffered.us.library ?? 0) + (buffered.us.driver ?? 0), 1),
      // the same route over a server with the same round trip and no CPU, no driver, no socket
      inProcessVsNoDb: ratio(inProcessRow.rate, noop.rate),
      inProcessRoundTripMs: round(roundTrip.ms, 2),
      // as it came out, measured as the buffered route's is (the buffer's median send → answer)
      inProcessAchievedRoundTripMs: round(roundTrip.achievedMs, 2),
      // app CPU per request the buffer adds to the no-DB route with no driver below it (library, its promises and timers, the awaiting handler)
      bufferInRouteUs: difference(inProcessRow.appUs, noop.appUs),
      // app CPU per request the driver and the server's socket add on top of that
      driverInRouteUs: difference(buffered.appUs, inProcessRow.appUs),
      // a handler that waits the same way (one batch out, the same round trip) with no library and no CPU per write:
      // the most any batcher with one batch in flight reaches at this round trip
      gateVsNoDb: ratio(gateRow.rate, noop.rate),
      // the same with two batches out, at the same round trip (a server's would grow): what a second batch in flight could win at most
      gate2VsNoDb: ratio(gate2Row.rate, noop.rate),
      // the buffered route against that ceiling: near 1, the rest of the way to the no-DB route is the round trip's
      bufferedVsGate: ratio(buffered.rate, gateRow.rate),
      // app CPU per request this library adds to that wait (no driver), and this library + the driver calls it makes
      libraryOverGateUs: difference(inProcessRow.appUs, gateRow.appUs),
      libraryPlusDriverOverGateUs: difference(buffered.appUs, gateRow.appUs),
      // the driver alone, at the batch size this load produced: the calls the buffer makes, and the cheapest
      driverFloorBulkWriteUs: floorBulkWrite.us.driver,
      driverFloorInsertCommandUs: floorInsertCommand.us.driver,
      // this library's own share plus the cheapest driver call: what no change of ours can go below
      libraryPlusCheapestDriverUs: round((buffered.us.library ?? 0) + (floorInsertCommand.us.driver ?? 0), 1),
      // the physical bound of this machine at this load (boundOf): the best a buffered route could reach
      boundVsNoDb: bound.withDriver === null ? null : ratio(bound.withDriver, noop.rate),
      boundVsNaive: bound.withDriver === null ? null : ratio(bound.withDriver, naive.rate),
      boundWithoutDriverVsNaive: bound.withoutDriver === null ? null : ratio(bound.withoutDriver, naive.rate),
    },
    notes: [
      `window: ${round(windowS, 1)} s of each route's load${rounds > 1 ? `, in ${rounds} rounds of ${round(roundS, 1)} s taken in turn with the other routes' (order reversed every other round; requests, CPU and samples add up; p50/p99 the worse round's)` : ''}, in the middle of each load (after ${round(warmS, 1)} s of warm-up${jitWarmS > 0 ? `, and ${jitWarmS} s of untimed load on every route before the first` : ', no untimed JIT warm-up before'}); requests = handler completions inside the window; ${cores} cores; load average at each route's start ${loadAvg.join(' / ')} — the machine is shared, so absolute µs move with other agents' load; compare shares`,
      `app rows: V8 CPU profile of the window (node:inspector, ${SAMPLING_INTERVAL_US} µs sampling) splits the main thread's CPU (/proc/self/task) by self-time samples; node: and native frames are charged to their nearest caller in fastify (+deps), dist/, the driver or the bench; with none they stay "node internals"; "other threads" = process CPU − main thread`,
      server === null
        ? 'server processes: not found by the URI\'s port (not Linux, or the server is remote): not measured'
        : `server processes: pid ${server.front} listening on the URI's port${server.postmaster === null ? '' : ` + PostgreSQL postmaster ${server.postmaster} and its children`} (only this server, not other servers on the machine)`,
      'other processes = machine busy − app − server − load generator; the sum of all rows is checked against cores × window seconds (sumVsWallCpu, 1.00 = all CPU accounted)',
      'bound (boundVsNoDb, boundVsNaive): cores ÷ (the no-DB route\'s app CPU + the driver-alone insert command\'s app CPU per write + the buffered route\'s server and load-generator CPU per request), no idle: the req/s a buffered route could reach if this library cost nothing and the driver no more than alone; boundWithoutDriverVsNaive: the same with the driver free too',
      `buffered, in-process server: the buffered route's handler over a second WriteBuffer whose stub Db answers each batch after ${round(roundTrip.ms, 2)} ms (the buffered route's median round trip, send → answer, from its buffer's stats; the stub's whole-ms timers are steered to average that, stub-db.mjs; inProcessAchievedRoundTripMs is its own median, measured the same way; the buffered route's round trips are skewed to the right, so a stub whose mean is their median answers sooner on average than the server did, if anything favouring this route) and costs no CPU — no driver, no socket; bufferInRouteUs = its app CPU − the no-DB route's (what the buffer costs in the route without a driver, with the extra event-loop wake-ups of a route that waits: fewer requests share each), driverInRouteUs = the buffered route's app CPU − its (what the driver and the server's socket add); both differences of whole-process CPU, so short windows (--quick) leave them noisy`,
      'group wait, no library: the handler builds the same document and awaits a batch of a few lines of bench code (stub-db.mjs, groupWait) that holds it until the batch returns: the batch goes at the end of the turn when none is out, else at the end of the turn in which the one out returns, or of the next if fewer than 64 gathered (the buffer\'s rule), and comes back after the in-process server\'s round trips; no library, no driver, no CPU per write. Its req/s is the ceiling of any batcher with one batch in flight at this round trip on this machine (gateVsNoDb); "2 batches out" lets a second batch go while one is out (gate2VsNoDb: the most a second batch in flight could win, since the stub\'s round trip does not grow with it, as a server\'s does); libraryOverGateUs = the in-process route\'s app CPU − its (this library\'s cost in the route, profile-free), libraryPlusDriverOverGateUs = the buffered route\'s − its (this library + the driver calls it makes + their socket, profile-free)',
      `driver alone: batches of ${floorBatch} documents (the buffered route's average in its window) sent straight through the driver, ${FLOOR_IN_FLIGHT} in flight, no library, no HTTP, profiled like a route; "bulkWrite" is the call the buffer makes, "insert command" one insert command through db.command (no bulk layer): its driver row is the least any sender through this driver pays per write at this batch size`,
      'caveat: on a busy machine the V8 profile over-charges socket writes (writev, writeBuffer): its samples land where the thread resumes after being preempted, and a loopback write that wakes the peer is where that happens; perf\'s on-CPU samples (standalone, FWB_CPU_PERF=1) put them 2-3x lower at load average 4-10, so the JS rows are the firmer part of the split',
    ],
  }
}

// ---------------------------------------------------------------- printing

const fmt = x => (x === null || x === undefined ? '—' : x.toLocaleString('en-US', { maximumFractionDigits: 1, minimumFractionDigits: 1 }))

/** a − b, µs per request; null when either was not measured */
function difference (a, b) {
  return a === null || b === null ? null : round(a - b, 1)
}

/**
 * The most req/s a buffered route could reach on these cores at this load: the no-DB route's whole
 * app process, plus the cheapest driver call per write at this batch size (its whole app process
 * in the driver-alone row: `withDriver`) or nothing (`withoutDriver`: a buffer and driver that cost
 * no CPU at all), plus the server's and the load generator's CPU per request as measured on the
 * buffered route, with no idle time. Against the naive and no-DB routes' measured rates this says
 * which ratios the machine allows before any library code runs.
 */
function boundOf ({ noop, buffered, floorInsertCommand }, cores) {
  const base = sum([noop.appUs, buffered.us.server, buffered.us.loadGen])
  if (base === null || floorInsertCommand.appUs === null) return { withDriver: null, withoutDriver: null }
  return { withDriver: (cores * 1e6) / (base + floorInsertCommand.appUs), withoutDriver: (cores * 1e6) / base }
}

/** Markdown: rows = components, columns = routes; µs per request (share of the app's CPU). */
export function accountTable (results) {
  const head = `| µs per request (% of app CPU w/o profiler thread) | ${results.map(r => r.name).join(' | ')} |`
  const lines = [head, `|---|${results.map(() => '--:').join('|')}|`]
  for (const c of COMPONENTS) {
    lines.push(`| ${c.name} | ${results.map(r => `${fmt(r.us[c.key])}${c.app ? ` (${fmt(r.appPct[c.key])}%)` : ''}`).join(' | ')} |`)
    if (c.key === 'profiler') lines.push(`| **app process total** | ${results.map(r => `**${fmt(r.appUs)}**`).join(' | ')} |`)
  }
  lines.push(`| **sum of rows** | ${results.map(r => `**${fmt(r.sumUs)}**`).join(' | ')} |`)
  lines.push(`| wall-clock CPU (cores × s ÷ requests) | ${results.map(r => `${fmt(r.wallCpuUs)} (sum ${r.sumVsWallCpu}x)`).join(' | ')} |`)
  lines.push(`| req/s in the window | ${results.map(r => r.rate.toLocaleString('en-US')).join(' | ')} |`)
  lines.push(`| p50 / p99 ms (whole load) | ${results.map(r => `${r.p50Ms} / ${r.p99Ms}`).join(' | ')} |`)
  lines.push(`| buffer: bulkWrites in the window, avg writes per batch | ${results.map(r => r.bulkWritesInWindow === 0 ? '—' : `${r.bulkWritesInWindow.toLocaleString('en-US')}, ${r.avgBatch}`).join(' | ')} |`)
  lines.push(`| of which native socket writes (charged above to their caller: Fastify / driver) | ${results.map(r => `${fmt(r.socketWriteUs.fastify ?? 0)} / ${fmt(r.socketWriteUs.driver ?? 0)}`).join(' | ')} |`)
  lines.push(`| node:/native self time charged to callers (% of main busy) | ${results.map(r => `${fmt(r.nodeOrNativeSelfPct)}%`).join(' | ')} |`)
  return lines.join('\n')
}

function topTable (r, components) {
  const lines = []
  for (const c of components) {
    const top = r.top[c] ?? []
    if (top.length === 0) continue
    const total = r.profileSamples - Math.round((r.idleMainPct * r.profileSamples) / 100)
    lines.push(`\n${r.name}: top self time in ${c} (% of main-thread busy samples)`)
    for (const t of top.slice(0, 12)) lines.push(`  ${fmt((100 * t.samples) / Math.max(1, total))}%  ${t.fn}`)
  }
  return lines.join('\n')
}

const isMain = process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href
if (isMain) {
  const { values: args } = parseArgs({ options: { quick: { type: 'boolean', default: false }, json: { type: 'string' } } })
  const uri = process.env.MONGODB_URI
  if (!uri) {
    console.error('MONGODB_URI is not set')
    process.exit(2)
  }
  if (process.env.FWB_CPU_PERF === '1' && !process.execArgv.includes('--perf-basic-prof')) {
    // perf needs V8's perf map (JIT code → function + file) and interpreted frames on the native stack
    const { status } = (await import('node:child_process')).spawnSync(process.execPath,
      ['--perf-basic-prof', '--interpreted-frames-native-stack', ...process.execArgv, ...process.argv.slice(1)], { stdio: 'inherit' })
    process.exit(status ?? 1)
  }
  const suite = await cpuAccountSuite({ uri, durationS: args.quick ? 3 : 10, jitWarmS: args.quick ? 1 : 4, accountRounds: args.quick ? 1 : 2 })
  process.stdout.write(`### ${suite.title}\n\n${suite.table}\n\nRatios: ${Object.entries(suite.ratios).map(([k, v]) => `${k} ${v}`).join(', ')}\n\n${suite.notes.map(n => `- ${n}`).join('\n')}\n`)
  if (suite.results[0].perf) {
    const keys = ['fastify', 'library', 'driver', 'bench', 'nodeInternals', 'gc', 'otherMain', 'profiler']
    process.stdout.write(`\nCross-check, main thread only, % of its CPU: V8 profile (wall-clock sampling) vs perf (on-CPU samples; "profiler" = the V8 profiler's SIGPROF handling on the main thread)\n\n| component | ${suite.results.map(r => `${r.name} V8 | ${r.name} perf`).join(' | ')} |\n|---|${suite.results.map(() => '--:|--:').join('|')}|\n`)
    for (const k of keys) process.stdout.write(`| ${k} | ${suite.results.map(r => `${r.v8MainPct[k] ?? '—'} | ${r.perf?.pct[k] ?? 0}`).join(' | ')} |\n`)
    process.stdout.write(`| socket writes (within the rows above) | ${suite.results.map(r => `${round((100 * Object.values(r.socketWriteUs).reduce((a, b) => a + (b ?? 0), 0)) / Math.max(1e-9, Object.values(r.v8MainPct).length && ['fastify', 'library', 'driver', 'bench', 'nodeInternals', 'gc', 'otherMain'].reduce((a, j) => a + (r.us[j] ?? 0), 0)), 1)} | ${round(Object.values(r.perf?.socketWritePct ?? {}).reduce((a, b) => a + b, 0), 1)}`).join(' | ')} |\n`)
  }
  for (const r of suite.results) process.stdout.write(topTable(r, r.key === 'noop' ? ['fastify'] : ['library', 'driver', 'fastify']) + '\n')
  for (const r of suite.floor) process.stdout.write(topTable(r, ['driver']) + '\n')
  if (args.json) await writeFile(args.json, JSON.stringify(suite, null, 2) + '\n')
}
