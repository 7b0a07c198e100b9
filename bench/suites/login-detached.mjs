// Suite: the login hot path as the example app writes it — cache + detached + linger — against
// the same route with plain awaited driver calls, at 100 connections, 1,000 users. A third row
// runs the buffered route without the linger, to show what the window buys. The example's rate
// limits and scrypt are left out, as the notes say (bench/login-limits.mjs).
import Fastify from 'fastify'
import { MongoClient } from 'mongodb'
import { createHash } from 'node:crypto'
import writeBuffer from '../../dist/index.js'
import { freshDb } from '../db.mjs'
import { load } from '../load.mjs'
import { loginLimitsLeftOut, loginLimitsNotes } from '../login-limits.mjs'
import { per1k, rate, ratio } from '../stats.mjs'
import { Tally } from '../tally.mjs'

const USERS = 1000
/** The window of examples/fastify-app/routes/login.mjs (its README says why). */
const LOGIN_LINGER_MS = 2000
const VARIANTS = [
  { key: 'naive', name: 'awaited findOne + updateOne + insertOne (driver)', path: 'naive' },
  { key: 'buffered', name: `cached findOne + detached updateOne lingering ${LOGIN_LINGER_MS} ms + detached insertOne`, path: `buffered/${LOGIN_LINGER_MS}` },
  { key: 'noLinger', name: 'cached findOne + detached updateOne (no linger) + detached insertOne', path: 'buffered/0' },
]
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
  app.post('/login/buffered/:linger', tally.track(async (req, reply) => {
    const lingerMs = Number(req.params.linger)
    const { username, password } = req.body
    const user = await users.findOne({ username })
    if (user === null || user.passwordSha256 !== sha256(password)) return reply.code(401).send({ ok: false })
    const now = new Date()
    users.updateOne({ _id: user._id }, { $max: { lastLoginAt: now }, $inc: { logins: 1 } }, { detached: true, lingerMs })
    audit.insertOne({ kind: 'login', userId: user._id, at: now }, { detached: true })
    return { ok: true }
  }))
  const base = await app.listen({ host: '127.0.0.1', port: 0 })
  const results = []
  for (const v of VARIANTS) {
    const client = v.key === 'naive' ? 'naive' : 'buffered'
    const before = { acked: tally.acked, statements: statements[client] }
    const r = await load(`login (${v.key}) @100`, { url: `${base}/login/${v.path}`, durationS, connections: 100, users: USERS })
    await tally.idle()
    if (client === 'buffered') await app.writeBuffer.flush() // its background writes count for it
    const served = tally.acked - before.acked
    results.push({
      key: v.key,
      name: v.name,
      rate: rate(r.requests, r.durationS * 1000),
      p50Ms: r.p50Ms,
      p99Ms: r.p99Ms,
      dbCommandsPer1kWrites: per1k(statements[client] - before.statements, served),
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
    lingerMs: LOGIN_LINGER_MS,
    leftOut: loginLimitsLeftOut,
    ratios: { detachedVsNaive: ratio(results[1].rate, results[0].rate), noLingerVsNaive: ratio(results[2].rate, results[0].rate) },
    notes: [
      'DB cmds / 1k writes column: update statements per 1,000 logins served (the lingering updates merge per user)',
      `with ${USERS.toLocaleString('en-US')} users logging in at random, a ${LOGIN_LINGER_MS} ms window costs at most one update statement per user per window`,
      'password check: sha256 compare stand-in on both routes',
      ...loginLimitsNotes(),
    ],
  }
}
