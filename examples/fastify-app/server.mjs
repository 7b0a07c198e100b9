// Entry point: `npm start` (or `node examples/fastify-app/server.mjs` with MONGODB_URI set).
import { constants } from 'node:os'
import { buildApp } from './app.mjs'

const {
  MONGODB_URI = 'mongodb://127.0.0.1:27018/',
  FWB_DB = 'fastify_write_buffer_example',
  PORT = '3000',
  LOG_LEVEL = 'info',
  REDIS_URL, // optional: the cache bus and shared rate limits; without it, both per instance
  NODE_ENV,
} = process.env

const app = await buildApp({
  mongoUrl: MONGODB_URI,
  database: FWB_DB,
  logger: { level: LOG_LEVEL },
  exposeStats: NODE_ENV !== 'production',
  redisUrl: REDIS_URL === '' ? undefined : REDIS_URL,
})

// Graceful shutdown: stop accepting requests, let in-flight ones finish, drain the
// write buffer, close the MongoClient, log "drained", exit 0 — within SHUTDOWN_MS (below the
// usual 30 s an orchestrator waits before SIGKILL), else exit 1. A second signal (Ctrl-C
// again) exits at once without draining, with 128 + its number, as if it had killed us.
const SHUTDOWN_MS = 25_000
let shuttingDown = false
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, async () => {
    if (shuttingDown) {
      app.log.warn({ signal }, 'second signal: exiting without draining')
      process.exit(128 + constants.signals[signal])
    }
    shuttingDown = true
    app.log.info({ signal }, 'shutting down')
    setTimeout(() => {
      app.log.error({ ms: SHUTDOWN_MS }, 'shutdown took too long')
      process.exit(1)
    }, SHUTDOWN_MS).unref()
    try {
      await app.close()
      app.log.info('drained')
      process.exit(0)
    } catch (err) {
      app.log.error({ err }, 'shutdown failed')
      process.exit(1)
    }
  })
}

try {
  await app.listen({ port: Number(PORT), host: '127.0.0.1' }) // logs "Server listening at http://…"
} catch (err) {
  app.log.error({ err }, 'could not start')
  await app.close()
  process.exit(1)
}
