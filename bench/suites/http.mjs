// Suite 3: one insert per HTTP request, three ways, under the same autocannon load.
import Fastify from 'fastify'
import { MongoClient } from 'mongodb'
import { setTimeout as sleep } from 'node:timers/promises'
import writeBuffer from '../../dist/index.js'
import { CommandCounter } from '../command-counter.mjs'
import { byKey } from '../by-key.mjs'
import { freshDb } from '../db.mjs'
import { load } from '../load.mjs'
import { per1k, rate, ratio, round } from '../stats.mjs'
import { Tally } from '../tally.mjs'

const BODY = JSON.stringify({ user: 'u1', kind: 'click', value: 42 })
/** how long fire-and-forget writes may drain after the load stops before their client is closed */
const FIRE_GRACE_MS = 1000

/**
 * `jitWarmS`: seconds of untimed load on each awaited route (and the no-DB one) before any is
 * measured, so the JIT has compiled Fastify, the driver and this library for every route alike
 * (a cold route pays its compilation inside its window: measured here, the compiler threads
 * were still busy 8 s into a load). Their writes are deleted and their counts reset before the
 * measured loads.
 */
export async function httpSuite ({ uri, durationS, jitWarmS = 0 }) {
  const { client, db, commands } = await freshDb(uri, 'http')
  // fire-and-forget gets its own client: its backlog is abandoned by closing it
  const fireClient = new MongoClient(uri, { monitorCommands: true })
  const fireCommands = new CommandCounter(fireClient)
  const fireDb = fireClient.db(db.databaseName)
  const fire = { done: 0, failed: 0 }

  const app = Fastify({ logger: false })
  await app.register(writeBuffer, { db, maxBatchSize: 1000 })
  const tallies = { noop: new Tally(), naive: new Tally(), buffered: new Tally(), fire: new Tally() }
  const doc = body => ({ ...body, at: new Date() })
  app.post('/noop', tallies.noop.track(async (req, reply) => reply.code(201).send({ ok: true })))
  app.post('/naive', tallies.naive.track(async (req, reply) => {
    await db.collection('naive').insertOne(doc(req.body))
    return reply.code(201).send({ ok: true })
  }))
  app.post('/buffered', tallies.buffered.track(async (req, reply) => {
    await app.writeBuffer.collection('buffered').insertOne(doc(req.body))
    return reply.code(201).send({ ok: true })
  }))
  app.post('/fire', tallies.fire.track(async (req, reply) => {
    fireDb.collection('fire').insertOne(doc(req.body)).then(() => { fire.done++ }, () => { fire.failed++ })
    return reply.code(202).send({ ok: true })
  }))
  const base = await app.listen({ host: '127.0.0.1', port: 0 })

  const variants = [
    { route: 'noop', name: 'no I/O (ceiling of this process)', counter: commands, awaited: false },
    { route: 'naive', name: 'naive awaited insertOne', counter: commands, awaited: true },
    { route: 'buffered', name: 'WriteBuffer awaited insertOne', counter: commands, awaited: true },
    { route: 'fire', name: 'fire-and-forget insertOne (not awaited)', counter: fireCommands, awaited: false },
  ]
  if (jitWarmS > 0) {
    for (const v of variants.filter(v => v.route !== 'fire')) { // fire: its backlog would carry into its window
      await load(`http: warm-up, ${v.name}`, { url: `${base}/${v.route}`, durationS: jitWarmS, body: BODY })
      await tallies[v.route].idle()
      if (v.route === 'buffered') await app.writeBuffer.flush()
      await db.collection(v.route).deleteMany({})
      tallies[v.route].acked = 0
      tallies[v.route].failed = 0
    }
  }
  const results = []
  const mismatches = []
  for (const v of variants) {
    const tally = tallies[v.route]
    const snap = v.counter.snapshot()
    const r = await load(`http: ${v.name}`, { url: `${base}/${v.route}`, durationS, body: BODY })
    await tally.idle()
    const extra = {}
    if (v.route === 'buffered') await app.writeBuffer.flush()
    if (v.route === 'fire') {
      extra.backlogAtEnd = tally.acked - fire.done - fire.failed
      await sleep(FIRE_GRACE_MS)
      await fireClient.close() // abandons what is still queued in the driver
    }
    const docs = await db.collection(v.route).countDocuments()
    const inserts = v.counter.since(snap, 'insert', v.route)
    const row = {
      key: v.route,
      name: v.name,
      route: `POST /${v.route}`,
      rate: rate(r.requests, r.durationS * 1000),
      p50Ms: r.p50Ms,
      p99Ms: r.p99Ms,
      dbCommandsPer1kWrites: per1k(inserts.commands, tally.acked),
      avgBatch: round(inserts.statements / inserts.commands, 1),
      requests: r.requests,
      ok2xx: r.ok2xx,
      non2xx: r.non2xx,
      errors: r.errors,
      timeouts: r.timeouts,
      serverAcked: tally.acked,
      serverFailed: tally.failed,
      docsInDb: docs,
      ...extra,
    }
    if (v.awaited) {
      row.docsMatchAcked = docs === tally.acked
      if (!row.docsMatchAcked) mismatches.push(`${row.route}: ${docs} documents in the DB but ${tally.acked} requests answered 2xx`)
    } else if (v.route === 'fire') {
      row.lostWrites = tally.acked - docs
    }
    results.push(row)
  }
  await app.close()
  await client.close()
  const { noop, naive, buffered, fire: fireRow } = byKey(results)
  return {
    title: 'HTTP: one insert per request',
    unit: 'req/s',
    latencyIs: 'per HTTP request (autocannon, 100 connections)',
    durationS,
    jitWarmS,
    results,
    ratios: {
      bufferedVsNaive: ratio(buffered.rate, naive.rate),
      bufferedP99VsNaive: ratio(buffered.p99Ms, naive.p99Ms),
      fireVsNaive: ratio(fireRow.rate, naive.rate),
      bufferedVsFire: ratio(buffered.rate, fireRow.rate),
      bufferedVsCeiling: ratio(buffered.rate, noop.rate),
    },
    mismatches,
    notes: [
      'awaited routes: documents in the DB are checked against the requests the server answered 2xx (autocannon stops with up to 100 requests in flight, so its own 2xx count can be lower)',
      `fire-and-forget: after the load, its writes get ${FIRE_GRACE_MS} ms to drain, then its client is closed; lostWrites = replied 2xx but never stored`,
      jitWarmS > 0 ? `JIT warm-up: ${jitWarmS} s of untimed load on each route but fire-and-forget before any is measured (their writes deleted, counts reset)` : 'no JIT warm-up (quick run)',
    ],
  }
}
