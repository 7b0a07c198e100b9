// A throwaway redis-server for tests and benchmarks (the cache bus): the Debian package's
// binary, on loopback, on a free port, its data dir in a temp folder, nothing persisted.
//   resolveRedis()  REDIS_URL if set, else startRedis(); { url, source, stop }
//   startRedis({ port? })  { url, port, pid, stop, kill }: kill() SIGKILLs it (fault tests),
//                          startRedis({ port }) brings one back on the same port.
// No apt-get here: .ci/run installs redis-server; a machine without it gets a clear error.
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { createServer, connect } from 'node:net'
import { tmpdir } from 'node:os'
import { delimiter, join } from 'node:path'

export const REDIS_MISSING = 'redis-server is not installed: `apt-get install redis-server` (Debian package; .ci/run installs it), or set REDIS_URL'

/** The redis-server binary on PATH (or /usr/bin, /usr/sbin), or undefined. */
export function redisServerBinary () {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/bin', '/usr/sbin', '/usr/local/bin']
  for (const dir of dirs) {
    const file = join(dir, 'redis-server')
    if (dir !== '' && existsSync(file)) return file
  }
  return undefined
}

/** A TCP port nothing listens on right now. */
function freePort () {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })
}

function portOpen (port) {
  return new Promise(resolve => {
    const socket = connect({ host: '127.0.0.1', port })
    const done = open => { socket.destroy(); resolve(open) }
    socket.setTimeout(200, () => done(false))
    socket.once('connect', () => done(true))
    socket.once('error', () => done(false))
  })
}

export async function startRedis ({ port } = {}) {
  const bin = redisServerBinary()
  if (bin === undefined) throw new Error(REDIS_MISSING)
  const chosen = port ?? await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'fwb-redis-'))
  const child = spawn(bin, [
    '--port', String(chosen), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no',
    '--daemonize', 'no', '--logfile', '', '--loglevel', 'warning',
  ], { stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  child.stderr.on('data', d => { stderr += d })
  const exited = new Promise(resolve => child.once('exit', resolve))
  let gone = false
  exited.then(() => { gone = true })
  for (let i = 0; ; i++) {
    if (await portOpen(chosen)) break
    if (gone || i >= 100) {
      child.kill('SIGKILL')
      rmSync(dir, { recursive: true, force: true })
      throw new Error(`redis-server did not start on port ${chosen}: ${stderr.trim() || 'no output'}`)
    }
    await new Promise(resolve => setTimeout(resolve, 50))
  }
  const end = async (signal) => {
    if (!gone) child.kill(signal)
    await exited
    rmSync(dir, { recursive: true, force: true })
  }
  return {
    url: `redis://127.0.0.1:${chosen}`,
    port: chosen,
    pid: child.pid,
    stop: () => end('SIGTERM'),
    kill: () => end('SIGKILL'),
  }
}

export async function resolveRedis () {
  if (process.env.REDIS_URL) return { url: process.env.REDIS_URL, source: 'REDIS_URL', stop: async () => {} }
  const server = await startRedis()
  return { url: server.url, source: `redis-server (pid ${server.pid})`, stop: server.stop }
}
