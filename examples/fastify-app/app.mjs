import Fastify from 'fastify'
import { Redis } from 'ioredis'
import writeBuffer from '../../dist/index.js'
import { boundJsonDepth, hideInternalErrors } from './json-body.mjs'
import { scryptSettings } from './password.mjs'
import { rateLimitSettings, registerRateLimit } from './rate-limits.mjs'
import registerRoute from './routes/register.mjs'
import loginRoute from './routes/login.mjs'
import eventsRoute from './routes/events.mjs'
import statsRoute from './routes/stats.mjs'
import metricsRoute from './routes/metrics.mjs'

/**
 * Builds the example app (not listening yet). The caller owns it: `app.listen()` or
 * `app.inject()`, then `app.close()`, which drains the write buffer and closes the client.
 * - `redisUrl`: a Redis shared by the app's instances: the read cache's bus and the rate
 *   limits' counters. Without it, each instance caches and counts on its own.
 * - `redisPrefix`: the bus channel and the rate-limit key prefix in that Redis (one per app).
 * - `rateLimits`: replaces some of RATE_LIMITS (rate-limits.mjs); `scrypt`: SCRYPT (password.mjs).
 */
export async function buildApp ({
  mongoUrl, database, logger = false, exposeStats = false,
  redisUrl, redisPrefix = 'fwb-example', rateLimits, scrypt,
}) {
  // options checked once, before anything is opened
  const limits = rateLimitSettings(rateLimits)
  const scryptParams = scryptSettings(scrypt)
  const app = Fastify({
    logger,
    // a client that stops sending mid-request must not hold a request (and shutdown) open
    requestTimeout: 30_000,
    connectionTimeout: 60_000,
    // Fastify's defaults strip unknown keys and coerce types; refuse them instead.
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false } },
  })
  // close() waits for every connection. One whose request is in flight when close() starts (a
  // browser's, fetch's) would stay open after its response for keepAliveTimeout (72 s), and
  // the shutdown would time out: from close() on, every response closes its connection.
  let closing = false
  app.addHook('preClose', async () => { closing = true })
  app.addHook('onSend', async (request, reply) => { if (closing) reply.header('connection', 'close') })
  boundJsonDepth(app) // a deeply nested body is a 400, not a stack overflow
  hideInternalErrors(app)
  try {
    // The rate limits' own connection (the bus opens its own two): a command to a Redis that is
    // down fails after one retry instead of queueing, as @fastify/rate-limit advises.
    const limitsRedis = redisUrl === undefined ? undefined : new Redis(redisUrl, { connectTimeout: 1000, maxRetriesPerRequest: 1 })
    if (limitsRedis !== undefined) {
      let reachable = true // one warning per outage, not one per reconnect attempt
      limitsRedis.on('ready', () => { reachable = true })
      limitsRedis.on('error', err => {
        if (reachable) app.log.warn({ code: err.code }, 'rate-limit Redis unreachable: /login and /register fail until it is back')
        reachable = false
      })
      app.addHook('onClose', async () => { await limitsRedis.quit().catch(() => limitsRedis.disconnect()) })
    }
    await registerRateLimit(app, { redis: limitsRedis, nameSpace: `${redisPrefix}-rate-limit-` })
    app.log.info(limitsRedis === undefined
      ? 'rate limits counted in memory: per instance (set REDIS_URL to share them between instances)'
      : 'rate limits counted in Redis, shared by every instance using it')
    await app.register(writeBuffer, {
      url: mongoUrl,
      database,
      cache: { ttlMs: 5000, ...(redisUrl === undefined ? {} : { bus: { redis: redisUrl, channel: redisPrefix } }) },
      // detached writes (login bookkeeping) that fail: logged once, with the server's code
      onWriteError: (err, info) => { app.log.error({ ...info, code: err.code, outcome: err.outcome }, 'a detached write failed') },
    })
    // Index management is not the buffer's job: use the driver directly.
    await app.writeBuffer.db.collection('users').createIndex({ username: 1 }, { unique: true })
  } catch (err) {
    await app.close()
    throw err
  }

  app.register(registerRoute, { limits, scrypt: scryptParams })
  app.register(loginRoute, { limits, scrypt: scryptParams })
  app.register(eventsRoute, { limits })
  if (exposeStats) app.register(statsRoute)
  app.register(metricsRoute)
  return app
}
