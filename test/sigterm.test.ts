import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { ObjectId } from 'mongodb'
import { freePort, listeningAddress } from './support/child-server.js'
import { mongoUri, openDb } from './helpers.js'

const serverScript = fileURLToPath(new URL('../examples/fastify-app/server.mjs', import.meta.url))

describe('SIGTERM during load (the example app as a child process)', () => {
  let child: ChildProcess | undefined
  afterAll(() => { if (child !== undefined && child.exitCode === null) child.kill('SIGKILL') })

  it('every write answered 2xx is in the database; the process exits 0', async () => {
    const { client, db } = await openDb('sigterm')
    const port = await freePort()
    child = spawn(process.execPath, [serverScript], {
      env: { ...process.env, MONGODB_URI: mongoUri(), FWB_DB: db.databaseName, PORT: String(port), LOG_LEVEL: 'warn', NODE_ENV: 'test' },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    const output: string[] = []
    const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>
    // the server logs at warn: wait for the port instead of the "listening" line
    listeningAddress(child, output).catch(() => {})
    const base = `http://127.0.0.1:${port}`
    for (let i = 0; i < 200; i++) {
      if (await fetch(`${base}/events`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"type":"warm"}' }).then(r => r.ok, () => false)) break
      await new Promise(resolve => setTimeout(resolve, 50))
    }
    const acked: string[] = []
    let attempted = 0
    let refused = 0
    let non2xx = 0
    let stop = false
    const worker = async (w: number): Promise<void> => {
      for (let i = 0; !stop; i++) {
        attempted++
        try {
          const res = await fetch(`${base}/events`, {
            method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ type: 'load', payload: { w, i } }),
          })
          if (res.status >= 200 && res.status < 300) acked.push(((await res.json()) as { id: string }).id)
          else { non2xx++; await res.arrayBuffer() }
        } catch {
          refused++ // connection refused/reset once the server is gone
          if (child?.exitCode !== null) stop = true
          await new Promise(resolve => setTimeout(resolve, 5))
        }
      }
    }
    const workers = Array.from({ length: 40 }, (_, w) => worker(w))
    await new Promise(resolve => setTimeout(resolve, 1500))
    child.kill('SIGTERM')
    const [code] = await exited
    stop = true
    await Promise.all(workers)
    const found = await db.collection('events').countDocuments({ _id: { $in: acked.map(id => new ObjectId(id)) } })
    console.log(JSON.stringify({ attempted, acknowledged: acked.length, found, non2xx, refused }))
    expect(code).toBe(0)
    expect(acked.length).toBeGreaterThan(50)
    expect(found).toBe(acked.length)
    await client.close()
  }, 60_000)
})
