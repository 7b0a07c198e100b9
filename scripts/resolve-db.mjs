// Resolves a MongoDB wire-protocol server for tests, benchmarks and the example app:
// 1. MONGODB_URI if set;
// 2. the project's local stand-in, FerretDB 1.24.2 on PostgreSQL 15 (scripts/dev-db.sh), when it
//    is already running: a connect to its port (100 ms at most) first, then `dev-db.sh status`;
// 3. mongodb-memory-server, if it can get a mongod binary (it downloads one at run time,
//    which fails fast on machines without internet: we give it 20 s at most);
// 4. the stand-in again, built if needed and started with `dev-db.sh up`.
// Returns { uri, source, stop } where stop() stops only what this call started.
import { execFile } from 'node:child_process'
import { connect } from 'node:net'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

const run = promisify(execFile)
const devDb = fileURLToPath(new URL('./dev-db.sh', import.meta.url))
const PROBE_MS = 100

/** Whether something accepts TCP connections on host:port within `ms`. */
function portOpen (host, port, ms) {
  return new Promise(resolve => {
    const socket = connect({ host, port })
    const done = open => { socket.destroy(); resolve(open) }
    socket.setTimeout(ms, () => done(false))
    socket.once('connect', () => done(true))
    socket.once('error', () => done(false))
  })
}

/** The stand-in's URI when it is up already; undefined otherwise. dev-db.sh owns its port and URI. */
async function runningStandIn (log) {
  const { stdout } = await run('bash', [devDb, 'uri'])
  const uri = stdout.trim()
  const { hostname, port } = new URL(uri)
  if (!await portOpen(hostname.replace(/^\[(.*)\]$/, '$1'), Number(port), PROBE_MS)) return undefined
  try {
    await run('bash', [devDb, 'status'])
    return uri
  } catch (err) {
    log(`port ${port} is open, but dev-db.sh status says: ${(err.stdout ?? '').trim() || err.message}`)
    return undefined
  }
}

/** Every line of why mongodb-memory-server failed (its messages go on after a "Details:" line), causes included. */
function reasonOf (err) {
  const parts = []
  for (let e = err; e !== undefined && e !== null; e = e instanceof Error ? e.cause : undefined) {
    parts.push(e instanceof Error ? e.message : String(e))
  }
  return parts.join('\ncaused by: ').split('\n').map(line => line.trimEnd()).join('\n    ')
}

async function tryMemoryServer (log) {
  if (process.env.FWB_NO_MEMORY_SERVER === '1') return undefined
  let MongoMemoryServer
  try {
    ({ MongoMemoryServer } = await import('mongodb-memory-server'))
  } catch {
    return undefined
  }
  log('trying mongodb-memory-server…')
  let timer
  // it console.warn()s a full stack when it cannot download mongod; we report the reason ourselves
  const warn = console.warn
  console.warn = () => {}
  const attempt = MongoMemoryServer.create()
  const timeout = new Promise(resolve => { timer = setTimeout(resolve, 20_000, undefined) })
  try {
    const server = await Promise.race([attempt, timeout])
    if (server === undefined) {
      attempt.then(s => s.stop(), () => {})
      log('mongodb-memory-server: no binary within 20 s')
      return undefined
    }
    return { uri: server.getUri(), source: 'mongodb-memory-server', stop: () => server.stop() }
  } catch (err) {
    log(`mongodb-memory-server unavailable: ${reasonOf(err)}`)
    return undefined
  } finally {
    clearTimeout(timer)
    console.warn = warn
  }
}

export async function resolveMongo (log = msg => console.error(`[db] ${msg}`)) {
  if (process.env.MONGODB_URI) return { uri: process.env.MONGODB_URI, source: 'MONGODB_URI', stop: async () => {} }
  const running = await runningStandIn(log)
  if (running !== undefined) {
    log('reusing the running FerretDB stand-in')
    return { uri: running, source: 'ferretdb', stop: async () => {} }
  }
  const memory = await tryMemoryServer(log)
  if (memory !== undefined) return memory
  // another process may have started it while mongodb-memory-server was trying: then it is not ours to stop
  const startedMeanwhile = await runningStandIn(log)
  if (startedMeanwhile !== undefined) {
    log('reusing the FerretDB stand-in, started meanwhile')
    return { uri: startedMeanwhile, source: 'ferretdb', stop: async () => {} }
  }
  log('starting the FerretDB + PostgreSQL stand-in (scripts/dev-db.sh up)')
  const { stdout } = await run('bash', [devDb, 'up'], { maxBuffer: 1 << 20, timeout: 15 * 60_000 })
  const uri = stdout.trim().split('\n').pop()
  return { uri, source: 'ferretdb', stop: async () => { await run('bash', [devDb, 'down']) } }
}
