// Suite 4: the hot login path, read cache off vs on, with and without the lastLogin update.
import Fastify from 'fastify'
import { createHash, randomBytes, scryptSync, timingSafeEqual } from 'node:crypto'
import writeBuffer from '../../dist/index.js'
import { byKey } from '../by-key.mjs'
import { freshDb } from '../db.mjs'
import { load } from '../load.mjs'
import { loginLimitsLeftOut, loginLimitsNotes } from '../login-limits.mjs'
import { withProgress } from '../progress.mjs'
import { per1k, rate, ratio, round } from '../stats.mjs'
import { Tally } from '../tally.mjs'

const USERS = 1000
const TTL_MS = 60_000
const sha256 = s => createHash('sha256').update(s).digest()

async function seedUsers (db) {
  const users = db.collection('users')
  await users.createIndex({ username: 1 }, { unique: true })
  const salt = randomBytes(16)
  // one real scrypt hash, stored as an app would; requests compare the cheap sha256 instead
  const passwordHash = `scrypt$${salt.toString('base64')}$${scryptSync('pw', salt, 64).toString('base64')}`
  await users.insertMany(Array.from({ length: USERS }, (_, i) => ({
    username: `user${i}`, passwordHash, passwordSha256: sha256(`pw${i}`).toString('base64'), logins: 0,
  })))
}

async function loginApp (db, cache, tally) {
  const app = Fastify({ logger: false })
  await app.register(writeBuffer, { db, maxBatchSize: 1000, ...(cache ? { cache: { ttlMs: TTL_MS } } : {}) })
  const users = app.writeBuffer.collection('users')
  const check = async (req, reply) => {
    const { username, password } = req.body
    const user = await users.findOne({ username })
    if (user === null || !timingSafeEqual(Buffer.from(user.passwordSha256, 'base64'), sha256(password))) {
      reply.code(401)
      return null
    }
    return user
  }
  app.post('/login', tally.track(async (req, reply) => {
    const user = await check(req, reply)
    if (user === null) return { ok: false }
    await users.updateOne({ _id: user._id }, { $set: { lastLoginAt: new Date() }, $inc: { logins: 1 } })
    return { ok: true }
  }))
  app.post('/login-ro', tally.track(async (req, reply) => {
    const user = await check(req, reply)
    return { ok: user !== null }
  }))
  return app
}

/** Each user logs in once (read-only route, 100 at a time): fills the cache before timing. */
async function warmUp (app) {
  const started = performance.now()
  for (let i = 0; i < USERS; i += 100) {
    await Promise.all(Array.from({ length: Math.min(100, USERS - i) }, (_, j) =>
      app.inject({ method: 'POST', url: '/login-ro', payload: { username: `user${i + j}`, password: `pw${i + j}` } })))
  }
  return Math.round(performance.now() - started)
}

export async function loginSuite ({ uri, loginDurationS: durationS }) {
  const { client, db, commands } = await freshDb(uri, 'login', { perKey: 'username' })
  await seedUsers(db)
  const results = []
  const warmUpMs = {}
  let updatesAcked = 0
  // one app per cache setting: the cache-on runs share one warm cache, as a server would
  for (const cache of [false, true]) {
    const tally = new Tally()
    const app = await loginApp(db, cache, tally)
    const base = await app.listen({ host: '127.0.0.1', port: 0 })
    const appSnap = commands.snapshot()
    const appStarted = performance.now()
    if (cache) warmUpMs.cacheOn = await withProgress('login: cache warm-up (each user once)', () => warmUp(app))
    for (const withUpdate of [false, true]) {
      const path = withUpdate ? '/login' : '/login-ro'
      const name = `${withUpdate ? 'find + update' : 'read-only'}, cache ${cache ? 'on' : 'off'}`
      const snap = commands.snapshot()
      const acked = tally.acked
      const r = await load(`login: ${name}`, { url: base + path, durationS, users: USERS })
      await tally.idle()
      await app.writeBuffer.flush()
      const logins = tally.acked - acked
      if (withUpdate) updatesAcked += logins
      const finds = commands.since(snap, 'find', 'users')
      const updates = commands.since(snap, 'update', 'users')
      const lookups = commands.lookupsSince(appSnap)
      results.push({
        key: `${withUpdate ? 'rw' : 'ro'}${cache ? 'On' : 'Off'}`,
        name: `POST ${path}: ${name}`,
        cache,
        withUpdate,
        rate: rate(r.requests, r.durationS * 1000),
        p50Ms: r.p50Ms,
        p99Ms: r.p99Ms,
        dbCommandsPer1kWrites: per1k(finds.commands + updates.commands, logins),
        findsPer1kLogins: per1k(finds.commands, logins),
        findsPerUser: round(lookups.finds / Math.max(1, lookups.values), 2),
        maxFindsForOneUser: lookups.max,
        appAgeS: round((performance.now() - appStarted) / 1000, 1),
        updateCommands: updates.commands,
        updateStatementsPerS: round(updates.statements / r.durationS),
        requests: r.requests,
        ok2xx: r.ok2xx,
        non2xx: r.non2xx,
        errors: r.errors,
        serverAcked: logins,
      })
    }
    await app.close() // drains the buffer
  }
  const [sum] = await db.collection('users').aggregate([{ $group: { _id: null, logins: { $sum: '$logins' } } }]).toArray()
  await client.close()
  const mismatches = sum.logins === updatesAcked ? [] : [`users.logins sums to ${sum.logins} but ${updatesAcked} logins with update were answered`]
  const { roOff, rwOff, roOn, rwOn } = byKey(results)
  return {
    title: 'Hot login path: read cache off vs on',
    unit: 'req/s',
    latencyIs: 'per HTTP request (autocannon, 100 connections)',
    durationS,
    users: USERS,
    cacheTtlMs: TTL_MS,
    warmUpMs,
    results,
    ratios: {
      cacheOnVsOffWithUpdate: ratio(rwOn.rate, rwOff.rate),
      cacheOnVsOffReadOnly: ratio(roOn.rate, roOff.rate),
    },
    loginsCounted: { inDb: sum.logins, answered: updatesAcked },
    leftOut: loginLimitsLeftOut,
    mismatches,
    notes: [
      'password check: sha256 compare stand-in; each user also stores a real scrypt hash (made once), not verified per request so scrypt CPU does not hide the DB effect',
      ...loginLimitsNotes(),
      `requests pick one of ${USERS} users at random; the cache-on app first logs each user in once (warm-up, ${warmUpMs.cacheOn} ms), then runs read-only and find + update on the same warm cache (TTL ${TTL_MS / 1000} s)`,
      'findsPerUser / maxFindsForOneUser count finds since the app (and its cache) started, warm-up included; findsPer1kLogins counts the timed run only',
    ],
  }
}
