// Resolves a MongoDB wire-protocol server for tests, benchmarks and the example app:
// 1. MONGODB_URI if set;
// 2. mongodb-memory-server, if it can get a mongod binary (it downloads one at run time,
//    which fails fast on machines without internet: we give it 20 s at most);
// 3. the project's local stand-in, FerretDB 1.24.2 on PostgreSQL 15 (scripts/dev-db.sh).
// Returns { uri, source, stop } where stop() stops only what this call started.
import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

const run = promisify(execFile)
const devDb = fileURLToPath(new URL('./dev-db.sh', import.meta.url))

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
  // it console.warn()s a full stack when it cannot download mongod; we report in one line
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
    log(`mongodb-memory-server unavailable: ${String(err.message).split('\n')[0]}`)
    return undefined
  } finally {
    clearTimeout(timer)
    console.warn = warn
  }
}

export async function resolveMongo (log = msg => console.error(`[db] ${msg}`)) {
  if (process.env.MONGODB_URI) return { uri: process.env.MONGODB_URI, source: 'MONGODB_URI', stop: async () => {} }
  const memory = await tryMemoryServer(log)
  if (memory !== undefined) return memory
  let running = false
  try {
    const { stdout } = await run('bash', [devDb, 'status'])
    running = stdout.trim() !== ''
  } catch {}
  log(running ? 'reusing the running FerretDB stand-in' : 'starting the FerretDB + PostgreSQL stand-in (scripts/dev-db.sh up)')
  const { stdout } = await run('bash', [devDb, 'up'], { maxBuffer: 1 << 20, timeout: 15 * 60_000 })
  const uri = stdout.trim().split('\n').pop()
  return {
    uri,
    source: 'ferretdb',
    stop: running ? async () => {} : async () => { await run('bash', [devDb, 'down']) },
  }
}
