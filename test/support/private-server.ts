import { execFile } from 'node:child_process'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { promisify } from 'node:util'
import { inject } from 'vitest'
import { freePort } from './child-server.js'

const run = promisify(execFile)

/** What the global setup found: which engine a test may start privately, or why none. */
export interface PrivateServerPlan {
  engine: 'ferretdb' | 'docdb' | ''
  /** scripts/dev-db.sh or docdb.sh */
  script: string
  /** why no private server can be started (engine '') */
  reason: string
}

/**
 * A server of the suite's engine that only the test that started it uses: its own ports, its
 * own data folder, its processes known by pid. A test that stops, pauses or restarts a server
 * does it to one of these, never to the suite's shared one.
 */
export interface PrivateServer {
  uri: string
  /** stops the wire-protocol process (FerretDB) this server started; its PostgreSQL keeps running */
  stopProcess: () => Promise<void>
  /** starts it again on the same port and data */
  startProcess: () => Promise<void>
  /** stops everything and deletes the data folder */
  close: () => Promise<void>
}

/** Why a private server cannot be started here, or '' when it can. */
export const privateServerUnavailable = (): string => {
  const plan = inject('privateServer')
  return plan.engine === '' ? plan.reason : ''
}

const sleep = (ms: number): Promise<void> => new Promise(resolve => setTimeout(resolve, ms))

async function freePortPair (): Promise<number> {
  for (;;) {
    const port = await freePort()
    if (port < 65535 && await portFree(port + 1)) return port
  }
}

async function portFree (port: number): Promise<boolean> {
  const { createServer } = await import('node:net')
  return new Promise(resolve => {
    const server = createServer()
    server.once('error', () => resolve(false))
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)))
  })
}

/**
 * Waits for the process to exit (SIGKILL after 5 s): it may exit at any moment in between,
 * even between the last look and the SIGKILL (seen once in CI, under load: `kill ESRCH`).
 */
async function waitGone (pid: number): Promise<void> {
  const alive = (): boolean => {
    try { process.kill(pid, 0); return true } catch { return false }
  }
  for (let i = 0; i < 100; i++) {
    if (!alive()) return
    await sleep(50)
  }
  try { process.kill(pid, 'SIGKILL') } catch { return } // gone meanwhile
  for (let i = 0; i < 100 && alive(); i++) await sleep(50)
}

export async function startPrivateServer (): Promise<PrivateServer> {
  const plan = inject('privateServer')
  if (plan.engine === '') throw new Error(`no private server: ${plan.reason}`)
  const dir = await mkdtemp('/var/tmp/fwb-private-')
  let script: (cmd: string) => Promise<{ stdout: string }>
  let stopProcess: () => Promise<void>
  let startProcess: () => Promise<void>
  if (plan.engine === 'ferretdb') {
    const port = await freePortPair() // FerretDB on port, PostgreSQL on port + 1: never the same port twice
    const env = { ...process.env, FWB_FERRET_PORT: String(port), FWB_PG_PORT: String(port + 1), FWB_STATE_DIR: dir }
    script = cmd => run('bash', [plan.script, cmd], { env, timeout: 120_000 })
    stopProcess = async () => { await script('stop-ferret') }
    startProcess = async () => { await script('start-ferret') }
  } else {
    // docdb.sh: PostgreSQL on port + 1, everything under DOCDB_ROOT
    const port = String(await freePortPair())
    const env = { ...process.env, DOCDB_ROOT: dir }
    script = cmd => run('bash', [plan.script, cmd, port], { env, timeout: 120_000 })
    stopProcess = async () => {
      // the FerretDB that docdb.sh started for this folder, by its pid (`down` would stop PostgreSQL too)
      const pid = Number((await readFile(`${dir}/ferretdb.pid`, 'utf8')).trim())
      process.kill(pid, 'SIGTERM')
      await waitGone(pid)
    }
    startProcess = async () => { await script('up') }
  }
  const close = async (): Promise<void> => {
    try { await script('down') } finally { await rm(dir, { recursive: true, force: true }) }
  }
  try {
    const uri = (await script('up')).stdout.trim().split('\n').pop()!
    return { uri, stopProcess, startProcess, close }
  } catch (err) {
    await close().catch(() => {})
    throw err
  }
}
