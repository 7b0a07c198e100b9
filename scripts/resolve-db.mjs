// Resolves a MongoDB wire-protocol server for tests, benchmarks and the example app.
//
// 1. MONGODB_URI, if set, always wins.
// 2. FWB_ENGINE picks a server engine the project can start by itself:
//    - ferretdb: FerretDB 1.24.2 on PostgreSQL 15 (scripts/dev-db.sh): reused when already
//      running on its port, else built if needed and started;
//    - docdb: FerretDB 2.5 on PostgreSQL 15 with the DocumentDB extension, run by
//      ../shared/docdb/docdb.sh next to the checkout (FWB_DOCDB_DIR overrides the folder; port
//      FWB_DOCDB_PORT, default 27417): reused when already listening, else built and started.
//      Where that folder is missing it says so and stops: nothing here can build DocumentDB.
//    - docdb-rs: the same FerretDB 2.5 + DocumentDB as a one-member replica set: the docdb engine's
//      server on FWB_DOCDB_PORT (reused or started as above) is the PostgreSQL backend of a second
//      FerretDB process, the binary docdb.sh built (DOCDB_ROOT, default /var/tmp/docdb-PORT), run
//      with FerretDB's hidden --dev-repl-set-name fwb-rs on FWB_DOCDB_RS_PORT (default 27437), with
//      a state folder of its own (a temporary one, deleted by stop()). `hello` then names setName
//      and hosts, so the driver takes the replica-set path (lsid + txnNumber on writes, one resend
//      of a failed write by itself); the server ignores txnNumber (probe `retryableWritesExactlyOnce`).
//      The URI has no directConnection: the driver discovers the set. Reused when something on
//      that port answers `hello` with a setName; refused when it answers without one.
// 3. FWB_ENGINE unset: the first of
//    a. a server already running: a MongoDB on 127.0.0.1:27017 (the port the README's snippets
//       use), then the ferretdb stand-in on its port (a connect of 100 ms at most, then a
//       `hello` / `dev-db.sh status`);
//    b. mongodb-memory-server, if it can get a mongod binary (it downloads one at run time,
//       which fails fast on machines without internet: we give it 20 s at most);
//    c. the ferretdb stand-in, built if needed and started.
// Returns { uri, source, stop } where stop() stops only what this call started.
import { execFile, spawn } from 'node:child_process'
import { existsSync, mkdtempSync, openSync, closeSync, readFileSync, rmSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

const run = promisify(execFile)
const devDb = fileURLToPath(new URL('./dev-db.sh', import.meta.url))
const checkout = dirname(dirname(devDb))
const PROBE_MS = 100
export const ENGINES = ['ferretdb', 'docdb', 'docdb-rs']
/** What server-info.mjs's describeServer() reports for each engine's server (docdb-rs is docdb behind a replica-set front end). */
export const ENGINE_SERVERS = { ferretdb: 'ferretdb', docdb: 'docdb', 'docdb-rs': 'docdb' }
/** The replica-set name the docdb-rs engine's FerretDB announces. */
export const DOCDB_RS_SET = 'fwb-rs'

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

/** Runs a script, its progress (stderr) shown as it comes; resolves with its stdout. */
function runShown (file, args, env = process.env) {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [file, ...args], { stdio: ['ignore', 'pipe', 'inherit'], env })
    let out = ''
    child.stdout.on('data', chunk => { out += chunk })
    child.once('error', reject)
    child.once('exit', code => code === 0 ? resolve(out) : reject(new Error(`${file} ${args.join(' ')} exited with ${code}`)))
  })
}

/** A MongoDB (or any server answering `hello`) already listening on 127.0.0.1:27017. */
async function runningOn27017 () {
  if (!await portOpen('127.0.0.1', 27017, PROBE_MS)) return undefined
  const uri = 'mongodb://127.0.0.1:27017/'
  const { MongoClient } = await import('mongodb')
  const client = new MongoClient(uri, { serverSelectionTimeoutMS: 1_000, directConnection: true })
  try {
    await client.db('admin').command({ hello: 1 })
    return uri
  } catch {
    return undefined
  } finally {
    await client.close()
  }
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

/** The ferretdb engine: the stand-in, reused if running, else started (and then stopped by stop()). */
async function ferretdb (log) {
  const running = await runningStandIn(log)
  if (running !== undefined) {
    log('reusing the running FerretDB 1.24 stand-in')
    return { uri: running, source: 'ferretdb (running)', stop: async () => {} }
  }
  log('starting the FerretDB 1.24 + PostgreSQL stand-in (scripts/dev-db.sh up)')
  const uri = (await runShown(devDb, ['up'])).trim().split('\n').pop()
  return { uri, source: 'ferretdb', stop: async () => { await run('bash', [devDb, 'down']) } }
}

/** Where docdb.sh is expected: ../shared/docdb next to the checkout, or FWB_DOCDB_DIR. */
export function docdbScript () {
  return join(resolve(process.env.FWB_DOCDB_DIR ?? join(checkout, '..', 'shared', 'docdb')), 'docdb.sh')
}

/** Why the docdb engine cannot run here, or undefined when it can. */
export function docdbMissing () {
  const script = docdbScript()
  if (!existsSync(script)) {
    return `the docdb engine needs ${script} (the shared DocumentDB build folder next to the checkout, ` +
      'or FWB_DOCDB_DIR); it is not on this machine, so only FWB_ENGINE=ferretdb (FerretDB 1.24) can run here'
  }
  return undefined
}

/** The docdb engine: docdb.sh's server on FWB_DOCDB_PORT, reused if listening, else started (and then stopped by stop()). */
async function docdb (log) {
  const missing = docdbMissing()
  if (missing !== undefined) throw new Error(missing)
  const script = docdbScript()
  const port = process.env.FWB_DOCDB_PORT ?? '27417'
  if (await portOpen('127.0.0.1', Number(port), PROBE_MS)) {
    log(`reusing the server listening on ${port} (docdb.sh up ${port} started it, or it is in use: the probe below says what it is)`)
    return { uri: `mongodb://127.0.0.1:${port}/`, source: 'docdb (running)', stop: async () => {} }
  }
  log(`starting FerretDB 2.5 + DocumentDB (${script} up ${port}; the first run builds it, ~1.5 min plus apt)`)
  const uri = (await runShown(script, ['up', port])).trim().split('\n').pop()
  return { uri, source: 'docdb', stop: async () => { await run('bash', [script, 'down', port]) } }
}

/** `hello` of the single server at host:port (directConnection: no discovery); undefined when it does not answer. */
async function helloOf (port, ms = 2_000) {
  const { MongoClient } = await import('mongodb')
  const client = new MongoClient(`mongodb://127.0.0.1:${port}/?directConnection=true`, { serverSelectionTimeoutMS: ms, connectTimeoutMS: ms })
  try {
    return await client.db('admin').command({ hello: 1 })
  } catch {
    return undefined
  } finally {
    await client.close()
  }
}

/** Stops a child process this module spawned, by its pid: SIGTERM first, SIGKILL after 5 s (it may exit at any moment in between). */
async function killAndWait (child) {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise(resolve => child.once('exit', resolve))
  try { process.kill(child.pid, 'SIGTERM') } catch { return }
  const timer = setTimeout(() => { try { process.kill(child.pid, 'SIGKILL') } catch {} }, 5_000)
  await exited
  clearTimeout(timer)
}

/**
 * The docdb-rs engine: the docdb engine's server as the backend of a second FerretDB that calls
 * itself a replica set, reused if one listens on FWB_DOCDB_RS_PORT. stop() kills only the FerretDB it spawned (by pid, then deletes its state
 * folder) and stops the backend only if this call started it.
 */
async function docdbRs (log) {
  const port = process.env.FWB_DOCDB_RS_PORT ?? '27437'
  if (await portOpen('127.0.0.1', Number(port), PROBE_MS)) {
    const hello = await helloOf(port)
    if (typeof hello?.setName !== 'string') {
      throw new Error(`port ${port} (FWB_DOCDB_RS_PORT) is in use by something that ${hello === undefined ? 'does not answer hello' : 'is not a replica set (hello has no setName)'}: stop it or pick another port`)
    }
    log(`reusing the replica set "${hello.setName}" listening on ${port} (the probe below says what it is)`)
    return { uri: `mongodb://127.0.0.1:${port}/`, source: 'docdb-rs (running)', stop: async () => {} }
  }
  const backend = await docdb(log)
  const backendPort = new URL(backend.uri).port || '27417'
  const binary = join(process.env.DOCDB_ROOT ?? `/var/tmp/docdb-${backendPort}`, 'ferretdb')
  const stopBackend = async () => { await backend.stop() }
  if (!existsSync(binary)) {
    await stopBackend()
    throw new Error(`the docdb-rs engine runs the FerretDB binary docdb.sh built, ${binary} (DOCDB_ROOT), which is not there: is the server on ${backendPort} docdb.sh's?`)
  }
  const state = mkdtempSync(join(tmpdir(), 'fwb-docdb-rs-'))
  const logFile = join(state, 'ferretdb.log')
  const out = openSync(logFile, 'a')
  log(`starting FerretDB 2.5 as replica set "${DOCDB_RS_SET}" on ${port} (backend: PostgreSQL on ${Number(backendPort) + 1}; state and log in ${state})`)
  const child = spawn(binary, [
    `--postgresql-url=postgres://postgres@127.0.0.1:${Number(backendPort) + 1}/postgres?pool_max_conns=50`,
    '--no-auth', `--state-dir=${state}`, `--listen-addr=127.0.0.1:${port}`, '--debug-addr=',
    '--telemetry=disable', '--log-level=error', `--dev-repl-set-name=${DOCDB_RS_SET}`,
    // a process group of its own: a Ctrl-C at the terminal (sent to the whole foreground group)
    // must not stop the server under an app still draining into it; stop() stops it, by pid
  ], { stdio: ['ignore', out, out], detached: true })
  closeSync(out)
  child.unref()
  const spawned = new Promise(resolve => { child.once('spawn', resolve); child.once('error', resolve) })
  const stop = async () => {
    await killAndWait(child)
    rmSync(state, { recursive: true, force: true })
    await stopBackend()
  }
  try {
    const err = await spawned
    if (err instanceof Error) throw err
    // it listens within a second or two; 20 s for a loaded machine
    let hello
    const deadline = Date.now() + 20_000
    while (Date.now() < deadline && child.exitCode === null && hello?.setName === undefined) {
      if (await portOpen('127.0.0.1', Number(port), PROBE_MS)) hello = await helloOf(port)
      else await new Promise(resolve => setTimeout(resolve, 100))
    }
    if (child.exitCode !== null || hello?.setName !== DOCDB_RS_SET) {
      const tail = readFileSync(logFile, 'utf8').trim().split('\n').slice(-5).join('\n    ')
      throw new Error(`FerretDB on ${port} did not come up as replica set ${DOCDB_RS_SET} ` +
        `(${child.exitCode !== null ? `exited with ${child.exitCode}` : `hello: ${JSON.stringify(hello?.setName)}`}); its log:\n    ${tail}`)
    }
  } catch (err) {
    await stop()
    throw err
  }
  return { uri: `mongodb://127.0.0.1:${port}/`, source: 'docdb-rs', stop }
}

export async function resolveMongo (log = msg => console.error(`[db] ${msg}`)) {
  if (process.env.MONGODB_URI) return { uri: process.env.MONGODB_URI, source: 'MONGODB_URI', stop: async () => {} }
  const engine = process.env.FWB_ENGINE ?? ''
  if (engine === 'ferretdb') return ferretdb(log)
  if (engine === 'docdb') return docdb(log)
  if (engine === 'docdb-rs') return docdbRs(log)
  if (engine !== '') throw new Error(`FWB_ENGINE must be one of ${ENGINES.join(', ')} (or unset), got "${engine}"`)

  const mongod = await runningOn27017()
  if (mongod !== undefined) {
    log('reusing the server already running on 127.0.0.1:27017')
    return { uri: mongod, source: 'running on 27017', stop: async () => {} }
  }
  const running = await runningStandIn(log)
  if (running !== undefined) {
    log('reusing the running FerretDB 1.24 stand-in')
    return { uri: running, source: 'ferretdb (running)', stop: async () => {} }
  }
  const memory = await tryMemoryServer(log)
  if (memory !== undefined) return memory
  // another process may have started it while mongodb-memory-server was trying: then it is not ours to stop
  return ferretdb(log)
}
