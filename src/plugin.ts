import fp from 'fastify-plugin'
import type { Db, MongoClient, MongoClientOptions } from 'mongodb'
import type { FastifyInstance, FastifyPluginAsync } from 'fastify'
import { ConnectError, InvalidOptionError, describe } from './errors.js'
import { DEFAULTS, WRITE_BUFFER_OPTION_NAMES, type Logger, type WriteBufferOptions } from './options.js'
import { rememberResponse, writeSignal } from './request-signal.js'
import { checkConnection, clientFor } from './mongo/connect.js'
import { urlWithoutCredentials } from './mongo/credentials.js'
import { WriteBuffer } from './write-buffer.js'

/** Options every form of the plugin takes: the WriteBuffer's, plus the start-up check. */
interface PluginCommonOptions extends WriteBufferOptions {
  /**
   * Start-up fails with WRITE_BUFFER_CONNECT_FAILED if the server does not answer a ping
   * within this time (below Fastify's 10 s plugin timeout). 0 skips the check. Default 5,000.
   */
  connectTimeoutMs?: number
}

/** An existing Db: the plugin never closes its client. */
export interface WriteBufferPluginDbOptions extends PluginCommonOptions {
  db: Db
  url?: never
  database?: never
  clientOptions?: never
}

/** A URL: the plugin creates the MongoClient, owns it and closes it on app.close(). */
export interface WriteBufferPluginUrlOptions extends PluginCommonOptions {
  db?: never
  /** mongodb:// or mongodb+srv:// */
  url: string
  /** Database name (default: the one in the URL). */
  database?: string
  clientOptions?: MongoClientOptions
}

/** Exactly one of `{ db }` or `{ url, database?, clientOptions? }`, with any WriteBuffer option. */
export type WriteBufferPluginOptions = WriteBufferPluginDbOptions | WriteBufferPluginUrlOptions

declare module 'fastify' {
  interface FastifyInstance {
    writeBuffer: WriteBuffer
  }
  interface FastifyRequest {
    /**
     * Aborts when the client goes away before the response is sent: pass it as a write's
     * `signal` and the write is dropped if it has not been sent yet (WRITE_BUFFER_ABORTED).
     * Created on first access only.
     */
    readonly writeSignal: AbortSignal
  }
}

const PLUGIN_KEYS = new Set(['db', 'url', 'database', 'clientOptions', 'connectTimeoutMs'])

/**
 * Thin shell over WriteBuffer: decorates `app.writeBuffer`, logs through `app.log`, checks
 * the server at start-up, and closes in `onClose`: the buffer first (it drains), then the
 * MongoClient, only when it created it.
 *
 * Why onClose and not preClose: Fastify's close() marks the instance closing (new requests
 * get 503), runs preClose hooks, waits for the requests still in their handlers
 * (server.close), and only then runs onClose hooks, latest registered first. Draining in
 * preClose refused the writes of every request still in its handler; in onClose it sends
 * them, and still before the onClose hook of a client plugin registered earlier
 * (@fastify/mongodb) closes the client.
 */
const plugin: FastifyPluginAsync<WriteBufferPluginOptions> = async (app: FastifyInstance, options) => {
  const { db, url, database, clientOptions, connectTimeoutMs = 5_000, ...rest } = options
  for (const key of Object.keys(rest)) {
    if (!PLUGIN_KEYS.has(key) && !WRITE_BUFFER_OPTION_NAMES.includes(key)) throw new InvalidOptionError(`unknown option ${key}`)
  }
  if ((db === undefined) === (url === undefined)) {
    throw new InvalidOptionError('fastify-write-buffer needs exactly one of `db` (a mongodb Db) or `url`')
  }
  const givenUrl: unknown = url
  if (givenUrl !== undefined && (typeof givenUrl !== 'string' || !/^mongodb(\+srv)?:\/\//.test(givenUrl))) {
    throw new InvalidOptionError(`url must be a mongodb:// or mongodb+srv:// string, got ${describe(typeof givenUrl === 'string' ? urlWithoutCredentials(givenUrl) : givenUrl)}`)
  }
  // with a given Db they would be silently ignored: its client and its database are made already
  for (const [key, value] of [['database', database], ['clientOptions', clientOptions]] as const) {
    if (db !== undefined && value !== undefined) throw new InvalidOptionError(`${key} only applies with \`url\` (the plugin makes no client for a given \`db\`)`)
  }
  if (database !== undefined && (typeof database !== 'string' || database === '')) {
    throw new InvalidOptionError(`database must be a non-empty string, got ${describe(database)}`)
  }
  const givenClientOptions: unknown = clientOptions
  if (givenClientOptions !== undefined && (givenClientOptions === null || typeof givenClientOptions !== 'object' || Array.isArray(givenClientOptions))) {
    throw new InvalidOptionError(`clientOptions must be an object (MongoClientOptions), got ${describe(givenClientOptions)}`)
  }
  const connectMs: unknown = connectTimeoutMs
  if (typeof connectMs !== 'number' || !Number.isInteger(connectMs) || connectMs < 0 || connectMs > 600_000) {
    throw new InvalidOptionError(`connectTimeoutMs must be an integer from 0 to 600000, got ${describe(connectMs)}`)
  }
  // past Fastify's own plugin timeout the user would get its message, which names no host
  const pluginTimeout = app.initialConfig.pluginTimeout ?? 0
  if (pluginTimeout > 0 && connectMs >= pluginTimeout) {
    throw new InvalidOptionError(`connectTimeoutMs (${connectMs}) must be below Fastify's pluginTimeout (${pluginTimeout}), or raise pluginTimeout`)
  }

  let client: MongoClient | undefined
  let target: Db
  if (db !== undefined) {
    const given: unknown = db
    if (given === null || typeof given !== 'object' || typeof (given as Db).collection !== 'function') {
      throw new InvalidOptionError(`db must be a mongodb Db, got ${describe(db)}`)
    }
    target = db
  } else {
    ({ client, db: target } = clientFor(url, database, clientOptions)) // a bad url, clientOptions or database: InvalidOptionError
  }

  // Everything that can fail without I/O first (options, a second registration), and the
  // close hook before the ping: a registration that fails or times out must not leave a client open.
  let buffer: WriteBuffer | undefined
  try {
    const built = new WriteBuffer(target, { logger: app.log, ...rest })
    buffer = built
    app.decorate('writeBuffer', built)
    app.decorateRequest('writeSignal', { getter: writeSignal })
    const lifecycle = { closed: false }
    app.addHook('onRequest', rememberResponse)
    app.addHook('onClose', async () => {
      lifecycle.closed = true
      await built.close()
      if (client !== undefined) await closeClient(client, rest.closeTimeoutMs ?? DEFAULTS.closeTimeoutMs, app.log)
    })
    if (connectTimeoutMs > 0) await checkConnection(target, connectTimeoutMs)
    if (lifecycle.closed) throw new ConnectError('fastify-write-buffer: the app closed before MongoDB answered', undefined)
  } catch (err) {
    await buffer?.close()
    await client?.close()
    throw err
  }
}

/**
 * Closes the client the plugin made, waiting at most `timeoutMs` (0: without limit). The
 * driver's close() ends the server's sessions with a command first, and waits for its answer
 * without limit: with the server stalled, app.close() would never return. Past the bound the
 * close goes on in the background (the writes it held already failed: closing destroys the
 * connections in use first), and the app is told.
 */
async function closeClient (client: MongoClient, timeoutMs: number, log: Logger): Promise<void> {
  const closing = client.close()
  if (timeoutMs === 0) {
    await closing
    return
  }
  let timer: NodeJS.Timeout | undefined
  let late: boolean
  try {
    late = await Promise.race([
      closing.then(() => false),
      new Promise<boolean>(resolve => { timer = setTimeout(resolve, timeoutMs, true).unref() }),
    ])
  } finally {
    clearTimeout(timer)
  }
  if (late) {
    closing.catch(() => {})
    log.warn({ timeoutMs }, 'fastify-write-buffer: the MongoClient did not close within closeTimeoutMs (a stalled server?); it goes on closing in the background')
  }
}

export const writeBufferPlugin = fp(plugin, { fastify: '5.x', name: 'fastify-write-buffer' })
export default writeBufferPlugin
