import Fastify from 'fastify'
import writeBuffer from '../../dist/index.js'
import { boundJsonDepth, hideInternalErrors } from './json-body.mjs'
import registerRoute from './routes/register.mjs'
import loginRoute from './routes/login.mjs'
import eventsRoute from './routes/events.mjs'
import statsRoute from './routes/stats.mjs'
import metricsRoute from './routes/metrics.mjs'

/**
 * Builds the example app (not listening yet). The caller owns it: `app.listen()` or
 * `app.inject()`, then `app.close()`, which drains the write buffer and closes the client.
 */
export async function buildApp ({ mongoUrl, database, logger = false, exposeStats = false }) {
  const app = Fastify({
    logger,
    // a client that stops sending mid-request must not hold a request (and shutdown) open
    requestTimeout: 30_000,
    connectionTimeout: 60_000,
    // Fastify's defaults strip unknown keys and coerce types; refuse them instead.
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false } },
  })
  boundJsonDepth(app) // a deeply nested body is a 400, not a stack overflow
  hideInternalErrors(app)
  try {
    await app.register(writeBuffer, {
      url: mongoUrl,
      database,
      cache: { ttlMs: 5000 },
      // detached writes (login bookkeeping) that fail: logged once, with the server's code
      onWriteError: (err, info) => { app.log.error({ ...info, code: err.code, outcome: err.outcome }, 'a detached write failed') },
    })
    // Index management is not the buffer's job: use the driver directly.
    await app.writeBuffer.db.collection('users').createIndex({ username: 1 }, { unique: true })
  } catch (err) {
    await app.close()
    throw err
  }

  app.register(registerRoute)
  app.register(loginRoute)
  app.register(eventsRoute)
  if (exposeStats) app.register(statsRoute)
  app.register(metricsRoute)
  return app
}
