import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Fastify, { type FastifyInstance } from 'fastify'
import fastifyMongo from '@fastify/mongodb'
import type { Db, MongoClient } from 'mongodb'
import writeBuffer from '../src/index.js'
import { mongoUri, openDb } from './helpers.js'
import { FaultProxy, hostPortOf } from './support/fault-proxy.js'

/**
 * app.close() during load: requests already inside their handlers finish normally and their
 * writes reach the database; requests that arrive after close began are not taken; the client
 * closes only after the buffer has drained.
 */
const IN_HANDLER = 150
const WORK_MS = 300

let client: MongoClient
let db: Db
beforeAll(async () => { ({ client, db } = await openDb('graceful_close')) })
afterAll(async () => { await client.close() })

/** A route that works WORK_MS before its two writes, as a real handler would. */
function addWorkRoute (app: FastifyInstance, collection: string, started: { n: number }): void {
  app.post('/work', async (req, reply) => {
    started.n++
    await sleep(WORK_MS)
    const { i } = req.body as { i: number }
    const events = app.writeBuffer.collection(collection)
    await events.insertOne({ i, kind: 'work' })
    await events.updateOne({ i }, { $set: { done: true } })
    return reply.code(201).send({ i })
  })
}

/** One POST on a connection of its own (no keep-alive: server.close() waits for idle keep-alive sockets). */
function post (port: number, body: object): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: '/work', method: 'POST', agent: false, headers: { 'content-type': 'application/json', connection: 'close' } }, res => {
      res.resume()
      res.on('end', () => { resolve(res.statusCode ?? 0) })
    })
    req.on('error', reject)
    req.end(JSON.stringify(body))
  })
}

async function closeMidLoad (app: FastifyInstance, started: { n: number }): Promise<{ statuses: number[], late: number | string }> {
  await app.listen({ host: '127.0.0.1', port: 0 })
  const { port } = app.server.address() as AddressInfo
  const requests = Array.from({ length: IN_HANDLER }, (_, i) => post(port, { i }))
  while (started.n < IN_HANDLER) await sleep(5)
  const closing = app.close()
  await sleep(20) // close() has begun
  // a request after that is not taken: the port no longer accepts (a request reaching a route
  // on a connection still open would get Fastify's 503)
  const late = await post(port, { i: -1 }).catch((err: unknown) => (err as { code?: string }).code ?? 'failed')
  const statuses = await Promise.all(requests)
  await closing
  return { statuses, late }
}

describe('graceful close', () => {
  it('requests inside their handlers when close begins complete, with their writes; later ones are refused', async () => {
    const app = Fastify()
    await app.register(writeBuffer, { url: mongoUri(), database: db.databaseName })
    const started = { n: 0 }
    addWorkRoute(app, 'close_owned', started)
    const { statuses, late } = await closeMidLoad(app, started)
    expect(statuses.filter(s => s === 201)).toHaveLength(IN_HANDLER)
    expect([503, 'ECONNREFUSED']).toContain(late)
    expect(await db.collection('close_owned').countDocuments({ done: true })).toBe(IN_HANDLER)
  })

  it('with a user-owned client from @fastify/mongodb registered first: drained before that client closes', async () => {
    const app = Fastify()
    await app.register(fastifyMongo, { url: mongoUri(), database: db.databaseName, forceClose: true })
    await app.register(writeBuffer, { db: app.mongo.db as Db })
    const started = { n: 0 }
    addWorkRoute(app, 'close_user_client', started)
    const { statuses, late } = await closeMidLoad(app, started)
    expect(statuses.filter(s => s === 201)).toHaveLength(IN_HANDLER)
    expect([503, 'ECONNREFUSED']).toContain(late)
    expect(await db.collection('close_user_client').countDocuments({ done: true })).toBe(IN_HANDLER)
  })

  it('closeTimeoutMs still bounds the drain: a close never hangs on a stalled buffer', async () => {
    const app = Fastify()
    await app.register(writeBuffer, { db, closeTimeoutMs: 200, lingerMs: 60_000, maxInFlight: 1 })
    const c = app.writeBuffer.collection('close_bound')
    const writes = Array.from({ length: 10 }, (_, i) => c.insertOne({ i }))
    const t0 = Date.now()
    await app.close()
    expect(Date.now() - t0).toBeLessThan(5_000)
    const settled = await Promise.allSettled(writes)
    expect(settled.every(s => s.status === 'fulfilled' || (s.reason as { code?: string }).code === 'WRITE_BUFFER_CLOSED')).toBe(true)
  })

  it('with the server stalled and a batch on the wire, the client the plugin made closes within closeTimeoutMs too: app.close() returns', async () => {
    const target = hostPortOf(mongoUri())
    if (target === undefined) return // a replica-set URI: the proxy fronts one host
    const proxy = await FaultProxy.start(target.host, target.port)
    try {
      const app = Fastify()
      await app.register(writeBuffer, { url: proxy.uri(mongoUri()), database: db.databaseName, closeTimeoutMs: 300 })
      const c = app.writeBuffer.collection('close_client_stalled')
      await c.insertOne({ warm: true })
      proxy.stall()
      const late = c.insertOne({ late: true }).then(() => 'applied', (err: { outcome?: string }) => err.outcome)
      await sleep(50) // on the wire, held by the proxy
      const t0 = Date.now()
      await app.close()
      expect(Date.now() - t0).toBeLessThan(2_000) // the buffer's 300 ms, then the client's 300 ms
      expect(await late).toBe('unknown') // its connection was closed under it: it may have been applied
    } finally {
      proxy.resume()
      await proxy.close()
    }
  })
})
