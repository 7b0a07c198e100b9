import { execFile, spawn, type ChildProcess } from 'node:child_process'
import { appendFileSync, existsSync, mkdirSync, readFileSync, rmSync, chownSync, openSync, closeSync, writeFileSync } from 'node:fs'
import { homedir, tmpdir } from 'node:os'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { promisify } from 'node:util'

/**
 * A private FerretDB 1.24 stand-in on its own ports, with its own PostgreSQL 15 cluster, for
 * tests that pause (SIGSTOP), kill or starve the server. Only pids this module started are
 * ever signalled: FerretDB is our child; PostgreSQL's postmaster pid comes from the
 * postmaster.pid of the cluster we created. Same binaries and flags as scripts/dev-db.sh.
 */

const run = promisify(execFile)

const FERRET_VERSION = 'v1.24.2'
const CACHE_DIR = process.env.FWB_CACHE_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'fastify-write-buffer')
export const FERRET_BIN = join(CACHE_DIR, `ferretdb-${FERRET_VERSION}`)
const PG_BIN = '/usr/lib/postgresql/15/bin'
const IS_ROOT = process.getuid?.() === 0

/** Why a private server cannot be started here, or undefined when it can. */
export function privateServerUnavailable (): string | undefined {
  if (!existsSync(FERRET_BIN)) return `no FerretDB binary at ${FERRET_BIN} (scripts/dev-db.sh build)`
  if (!existsSync(join(PG_BIN, 'initdb'))) return `no PostgreSQL 15 at ${PG_BIN}`
  if (process.platform !== 'linux') return 'private servers are started on Linux only'
  return undefined
}

async function asPg (bin: string, args: string[]): Promise<{ stdout: string }> {
  const file = join(PG_BIN, bin)
  // from / : the checkout may be a folder postgres cannot enter
  return IS_ROOT ? await run('runuser', ['-u', 'postgres', '--', file, ...args], { cwd: '/' }) : await run(file, args)
}

async function portFree (port: number): Promise<boolean> {
  return await new Promise(resolve => {
    const s = createServer()
    s.once('error', () => resolve(false))
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)))
  })
}

/**
 * Ports are claimed across processes, not only checked: two suites running at once on one
 * machine (two checkouts, a developer's run beside CI's) would otherwise both find a port free
 * and start two clusters on it, one removing the other's data folder. A claim is a file named
 * after the port holding the claiming pid, made with O_EXCL; a claim whose process is gone is
 * taken over. Released by stop().
 */
const CLAIMS_DIR = join(tmpdir(), 'fwb-port-claims')

function alive (pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

function claim (port: number): boolean {
  mkdirSync(CLAIMS_DIR, { recursive: true })
  const file = join(CLAIMS_DIR, String(port))
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(file, String(process.pid), { flag: 'wx' })
      return true
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    }
    let owner = NaN
    try { owner = Number(readFileSync(file, 'utf8')) } catch { /* released meanwhile */ }
    if (Number.isInteger(owner) && owner > 0 && alive(owner)) return false // ours (handed out) or another live process's
    rmSync(file, { force: true }) // stale: its process is gone
  }
  return false
}

function unclaim (port: number): void {
  const file = join(CLAIMS_DIR, String(port))
  try {
    if (Number(readFileSync(file, 'utf8')) === process.pid) rmSync(file, { force: true })
  } catch {
    // not claimed
  }
}

/** The kernel's ephemeral port range: ports it hands to outgoing connections. */
function ephemeralPorts (): [number, number] {
  try {
    const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number)
    if (Number.isInteger(low) && Number.isInteger(high)) return [low as number, high as number]
  } catch {
    // not Linux
  }
  return [32768, 60999]
}

/**
 * The first port in [from, to] that this process could claim and nothing listens on. Never one
 * of the kernel's ephemeral ports: free when checked, such a port can be taken by any outgoing
 * connection later, and a server restarted on it then fails to bind (a private PostgreSQL on
 * 54160 did so in CI, once every few runs, after an immediate stop under 2,800 writes).
 */
export async function portIn (from: number, to: number): Promise<number> {
  const [low, high] = ephemeralPorts()
  if (from <= high && to >= low) throw new Error(`ports ${from}-${to} overlap the ephemeral range ${low}-${high}: pick ports below ${low}`)
  for (let p = from; p <= to; p++) {
    if (!claim(p)) continue // claimed before the await: two servers started at once get different ports
    if (await portFree(p)) return p
    unclaim(p)
  }
  throw new Error(`no free port in ${from}-${to}`)
}

export interface PrivateServerOptions {
  /** ports to pick from, e.g. [27160, 27199] for FerretDB and [26160, 26199] for PostgreSQL (below the ephemeral range: portIn) */
  ferretPorts: [number, number]
  pgPorts: [number, number]
  /** fsync=on, synchronous_commit=on, full_page_writes=on (default off, as dev-db.sh); see also setDurable() */
  durable?: boolean
  /** where the cluster and logs live (default /var/tmp/fwb-private-<pgPort>) */
  stateDir?: string
}

export class PrivateServer {
  #ferret: ChildProcess | null = null
  #paused = false

  private constructor (
    readonly ferretPort: number,
    readonly pgPort: number,
    readonly stateDir: string,
    readonly durable: boolean
  ) {}

  get uri (): string { return `mongodb://127.0.0.1:${this.ferretPort}/` }
  get pgData (): string { return join(this.stateDir, 'pg') }
  get ferretPid (): number | undefined { return this.#ferret?.pid }

  static async start (o: PrivateServerOptions): Promise<PrivateServer> {
    const unavailable = privateServerUnavailable()
    if (unavailable !== undefined) throw new Error(unavailable)
    const ferretPort = await portIn(...o.ferretPorts)
    const pgPort = await portIn(...o.pgPorts)
    // the PostgreSQL port is claimed by this process: so is the folder named after it
    const stateDir = o.stateDir ?? `/var/tmp/fwb-private-${pgPort}`
    const server = new PrivateServer(ferretPort, pgPort, stateDir, o.durable === true)
    try {
      await server.#initPg()
      await server.startPg()
      await server.#startFerret()
    } catch (err) {
      await server.stop()
      throw err
    }
    return server
  }

  async #initPg (): Promise<void> {
    // a fresh cluster each time: nothing left from an earlier run (or an earlier crash)
    rmSync(this.stateDir, { recursive: true, force: true })
    mkdirSync(this.stateDir, { recursive: true })
    if (IS_ROOT) {
      const { stdout } = await run('id', ['-u', 'postgres'])
      const uid = Number(stdout.trim())
      chownSync(this.stateDir, uid, uid)
      closeSync(openSync(join(this.stateDir, 'postgres.log'), 'a'))
      chownSync(join(this.stateDir, 'postgres.log'), uid, uid)
    }
    await asPg('initdb', ['-D', this.pgData, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C.UTF-8', '--no-sync'])
    // in the config file, not on the command line: setDurable() can then change them while it runs
    const durable = this.durable ? 'on' : 'off'
    appendFileSync(join(this.pgData, 'postgresql.conf'), `\nfsync = ${durable}\nsynchronous_commit = ${durable}\nfull_page_writes = ${durable}\n`)
  }

  /** Durable settings on or off while PostgreSQL runs (ALTER SYSTEM: kept across a restart). */
  async setDurable (on: boolean): Promise<void> {
    const v = on ? 'on' : 'off'
    for (const sql of [`ALTER SYSTEM SET fsync = ${v}`, `ALTER SYSTEM SET synchronous_commit = ${v}`, `ALTER SYSTEM SET full_page_writes = ${v}`, 'SELECT pg_reload_conf()']) {
      await asPg('psql', ['-h', '127.0.0.1', '-p', String(this.pgPort), '-U', 'postgres', '-tAc', sql])
    }
    const { stdout } = await asPg('psql', ['-h', '127.0.0.1', '-p', String(this.pgPort), '-U', 'postgres', '-tAc', 'SHOW fsync'])
    if (stdout.trim() !== v) throw new Error(`fsync is ${stdout.trim()}, not ${v}, after reload`)
  }

  /** Starts PostgreSQL (again, after stopPg / killPg: crash recovery included), and the ferretdb database. */
  async startPg (): Promise<void> {
    const log = join(this.stateDir, 'postgres.log')
    try {
      await asPg('pg_ctl', ['-D', this.pgData, '-l', log, '-w', '-t', '60', 'start', '-o',
        `-c listen_addresses=127.0.0.1 -c port=${this.pgPort} -c unix_socket_directories=${this.stateDir} ` +
        '-c max_connections=1300 -c shared_buffers=128MB'])
    } catch (err) {
      // pg_ctl says only "examine the log output": the log goes with the folder at stop(), so it goes in the error
      let tail = ''
      try { tail = readFileSync(log, 'utf8').split('\n').slice(-25).join('\n') } catch { /* no log */ }
      throw new Error(`${(err as Error).message}\n--- ${log} (last lines) ---\n${tail}`, { cause: err })
    }
    const { stdout } = await asPg('psql', ['-h', '127.0.0.1', '-p', String(this.pgPort), '-U', 'postgres', '-tAc', "SELECT 1 FROM pg_database WHERE datname='ferretdb'"])
    if (stdout.trim() !== '1') await asPg('createdb', ['-h', '127.0.0.1', '-p', String(this.pgPort), '-U', 'postgres', 'ferretdb'])
  }

  /** The postmaster's pid, from our own cluster's postmaster.pid (undefined when not running). */
  pgPid (): number | undefined {
    try {
      const pid = Number(readFileSync(join(this.pgData, 'postmaster.pid'), 'utf8').split('\n')[0])
      return Number.isInteger(pid) && pid > 0 ? pid : undefined
    } catch {
      return undefined
    }
  }

  /** PostgreSQL stopped at once, as after a crash (no checkpoint): `pg_ctl stop -m immediate`. */
  async stopPgImmediate (): Promise<void> {
    await asPg('pg_ctl', ['-D', this.pgData, '-m', 'immediate', '-w', '-t', '30', 'stop'])
  }

  async #startFerret (): Promise<void> {
    mkdirSync(join(this.stateDir, 'ferret-state'), { recursive: true })
    const log = openSync(join(this.stateDir, 'ferretdb.log'), 'a')
    // FerretDB 1.x holds one PostgreSQL connection per statement of an update command (dev-db.sh)
    const child = spawn(FERRET_BIN, [
      `--listen-addr=127.0.0.1:${this.ferretPort}`,
      '--handler=postgresql',
      `--postgresql-url=postgres://postgres@127.0.0.1:${this.pgPort}/ferretdb?pool_max_conns=1200`,
      `--state-dir=${join(this.stateDir, 'ferret-state')}`,
      '--telemetry=disable', '--log-level=error', '--debug-addr=-',
    ], { stdio: ['ignore', log, log] })
    closeSync(log)
    this.#ferret = child
    const deadline = Date.now() + 15_000
    while (Date.now() < deadline) {
      if (child.exitCode !== null) throw new Error(`FerretDB exited (${child.exitCode}); see ${this.stateDir}/ferretdb.log`)
      if (!await portFree(this.ferretPort)) return
      await new Promise(resolve => setTimeout(resolve, 100))
    }
    throw new Error(`FerretDB did not open port ${this.ferretPort}`)
  }

  /** SIGSTOP to our FerretDB: it keeps its sockets (the kernel still accepts bytes) but reads nothing. */
  pause (): void {
    const pid = this.#ferret?.pid
    if (pid === undefined) throw new Error('FerretDB not running')
    process.kill(pid, 'SIGSTOP')
    this.#paused = true
  }

  resume (): void {
    const pid = this.#ferret?.pid
    if (pid !== undefined && this.#paused) process.kill(pid, 'SIGCONT')
    this.#paused = false
  }

  /** Stops FerretDB and PostgreSQL (only ours), and removes the cluster. */
  async stop (): Promise<void> {
    const child = this.#ferret
    this.#ferret = null
    if (child !== null && child.exitCode === null && child.pid !== undefined) {
      if (this.#paused) process.kill(child.pid, 'SIGCONT')
      this.#paused = false
      const exited = new Promise(resolve => child.once('exit', resolve))
      child.kill('SIGKILL')
      await exited
    }
    if (this.pgPid() !== undefined) {
      try {
        await asPg('pg_ctl', ['-D', this.pgData, '-m', 'immediate', '-w', '-t', '30', 'stop'])
      } catch {
        // not running
      }
    }
    rmSync(this.stateDir, { recursive: true, force: true })
    unclaim(this.ferretPort)
    unclaim(this.pgPort)
  }
}
