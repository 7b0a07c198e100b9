// Suite: the login hot path as the example app writes it — cache + detached + linger — against
// the same route with plain awaited driver calls, at 100 connections, 1,000 users.
import Fastify from 'fastify'
import { MongoClient } from 'mongodb'
import { createHash } from 'node:crypto'
import writeBuffer from '../../dist/index.js'
import { freshDb } from '../db.mjs'
import { load } from '../load.mjs'
import { per1k, rate, ratio } from '../stats.mjs'
import { Tally } from '../tally.mjs'

const USERS = 1000
const sha256 = s => createHash('sha256').update(s).digest('base64')

export async function loginDetachedSuite ({ uri, curveDurationS: durationS }) {
  const { client: setup, db: setupDb } = await freshDb(uri, 'login_detached')
  await setupDb.collection('users').createIndex({ username: 1 }, { unique: true })
  await setupDb.collection('users').insertMany(Array.from({ length: USERS }, (_, i) => ({ username: `user${i}`, passwordSha256: sha256(`pw${i}`), logins: 0 })))
  await setup.close()
  const naiveClient = new MongoClient(uri, { monitorCommands: true })
  const bufferClient = new MongoClient(uri, { monitorCommands: true })
  const statements = { naive: 0, buffered: 0 }
  for (const [variant, c] of [['naive', naiveClient], ['buffered', bufferClient]]) {
    c.on('commandStarted', ev => {
      if (ev.commandName === 'update') statements[variant] += ev.command.updates.length
    })
  }
  await Promise.all([naiveClient.connect(), bufferClient.connect()])
  const naiveDb = naiveClient.db(setupDb.databaseName)
  const app = Fastify({ logger: false })
  await app.register(writeBuffer, { db: bufferClient.db(setupDb.databaseName), cache: { ttlMs: 60_000 }, onWriteError: () => {} })
  const tally = new Tally()
  app.post('/login/naive', tally.track(async (req, reply) => {
    const { username, password } = req.body
    const user = await naiveDb.collection('users').findOne({ username })
    if (user === null || user.passwordSha256 !== sha256(password)) return reply.code(401).send({ ok: false })
    const now = new Date()
    await naiveDb.collection('users').updateOne({ _id: user._id }, { $max: { lastLoginAt: now }, $inc: { logins: 1 } })
    await naiveDb.collection('audit').insertOne({ kind: 'login', userId: user._id, at: now })
    return { ok: true }
  }))
  const users = app.writeBuffer.collection('users')
  const audit = app.writeBuffer.collection('audit')
  app.post('/login/buffered', tally.track(async (req, reply) => {
    const { username, password } = req.body
    const user = await users.findOne({ username })
    if (user === null || user.passwordSha256 !== sha256(password)) return reply.code(401).send({ ok: false })
    const now = new Date()
    users.updateOne({ _id: user._id }, { $max: { lastLoginAt: now }, $inc: { logins: 1 } }, { detached: true, lingerMs: 500 })
    audit.insertOne({ kind: 'login', userId: user._id, at: now }, { detached: true })
    return { ok: true }
  }))
  const base = await app.listen({ host: '127.0.0.1', port: 0 })
  const results = []
  for (const variant of ['naive', 'buffered']) {
    const before = { acked: tally.acked, statements: statements[variant] }
    const r = await load(`login (${variant === 'naive' ? 'awaited driver calls' : 'cache + detached + linger'}) @100`, { url: `${base}/login/${variant}`, durationS, connections: 100, users: USERS })
    await tally.idle()
    if (variant === 'buffered') await app.writeBuffer.flush()
    const served = tally.acked - before.acked
    results.push({
      key: variant,
      name: variant === 'naive' ? 'awaited findOne + updateOne + insertOne (driver)' : 'cached findOne + detached lingering updateOne + detached insertOne',
      rate: rate(r.requests, r.durationS * 1000),
      p50Ms: r.p50Ms,
      p99Ms: r.p99Ms,
      dbCommandsPer1kWrites: per1k(statements[variant] - before.statements, served),
      non2xx: r.non2xx,
    })
  }
  await app.close()
  await Promise.all([naiveClient.close(), bufferClient.close()])
  return {
    title: 'Login: cache + detached + linger vs awaited driver calls (100 connections)',
    unit: 'req/s',
    latencyIs: 'per HTTP request (autocannon)',
    results,
    ratios: { detachedVsNaive: ratio(results[1].rate, results[0].rate) },
    notes: ['DB cmds / 1k writes column: update statements per 1,000 logins served (the lingering updates merge per user)'],
  }
}
