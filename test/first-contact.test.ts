import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ObjectId, type Db, type MongoClient } from 'mongodb'
import { freePort } from './support/child-server.js'
import { mongoUri, openDb } from './helpers.js'

/**
 * First contact (issue 42 item 7): what `npm start` does when you press Ctrl-C. The terminal sends
 * SIGINT to its whole foreground process group; here each process tree is spawned detached (a
 * group of its own) and signalled with process.kill(-pid), as the terminal would.
 */
const root = fileURLToPath(new URL('..', import.meta.url))
const serverScript = 'examples/fastify-app/server.mjs'

let client: MongoClient
let db: Db
beforeAll(async () => { ({ client, db } = await openDb('first_contact')) })
afterAll(async () => { await client?.close() })

interface Run { code: number | null, signal: NodeJS.Signals | null, lines: string[] }
const started: number[] = []
afterAll(() => { for (const pid of started) try { process.kill(-pid, 'SIGKILL') } catch {} })

/** Spawns `node args…` in a process group of its own; resolves once it logs "Server listening". */
async function startGroup (args: string[], port: number): Promise<{ pid: number, exited: Promise<Run> }> {
  const child = spawn(process.execPath, args, {
    cwd: root,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, MONGODB_URI: mongoUri(), FWB_DB: db.databaseName, PORT: String(port), LOG_LEVEL: 'info', NODE_ENV: 'test' },
  })
  started.push(child.pid as number)
  const lines: string[] = []
  let listening!: () => void
  const ready = new Promise<void>(resolve => { listening = resolve })
  for (const stream of [child.stdout, child.stderr]) {
    let buffered = ''
    stream.setEncoding('utf8').on('data', (chunk: string) => {
      buffered += chunk
      let nl: number
      while ((nl = buffered.indexOf('\n')) !== -1) {
        const line = buffered.slice(0, nl)
        buffered = buffered.slice(nl + 1)
        lines.push(line)
        if (line.includes('Server listening at')) listening()
      }
    })
  }
  const exited = once(child, 'exit').then(([code, signal]) => ({ code, signal, lines }) as Run)
  await Promise.race([ready, exited.then(run => { throw new Error(`exited (${String(run.code)}) before listening:\n${run.lines.join('\n')}`) })])
  return { pid: child.pid as number, exited }
}

/** A few writes in flight when the signal comes: each one answered 2xx must be in the database. */
function postEvents (port: number, n: number): Promise<string[]> {
  return Promise.all(Array.from({ length: n }, (_, i) =>
    fetch(`http://127.0.0.1:${port}/events`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ type: 'first-contact', payload: { i } }) })
      .then(async res => res.status < 300 ? ((await res.json()) as { id: string }).id : undefined, () => undefined)))
    .then(ids => ids.filter(id => id !== undefined))
}

/** The pino lines whose msg is `msg`. */
const logged = (run: Run, msg: string): number => run.lines.filter(line => line.includes(`"msg":"${msg}"`)).length

async function expectDrainedOnce (run: Run, acked: string[]): Promise<void> {
  const context = run.lines.join('\n')
  expect(logged(run, 'shutting down'), context).toBe(1)
  expect(logged(run, 'second signal: exiting without draining'), context).toBe(0)
  expect(logged(run, 'drained'), context).toBe(1)
  expect({ code: run.code, signal: run.signal }, context).toEqual({ code: 0, signal: null })
  expect(await db.collection('events').countDocuments({ _id: { $in: acked.map(id => new ObjectId(id)) } })).toBe(acked.length)
}

describe('the example server on its own', () => {
  it('SIGINT to its group: drains once, logs "drained", exits 0', async () => {
    const port = await freePort()
    const { pid, exited } = await startGroup([serverScript], port)
    const writes = postEvents(port, 20)
    await new Promise(resolve => setTimeout(resolve, 20))
    process.kill(-pid, 'SIGINT')
    await expectDrainedOnce(await exited, await writes)
  })
})
