import fp from 'fastify-plugin'
import { MongoClient, type Db, type MongoClientOptions } from 'mongodb'
import type { FastifyInstance, FastifyPluginAsync } from 'fastify'
import { InvalidOptionError, describe } from './errors.js'
import { WRITE_BUFFER_OPTION_NAMES, type WriteBufferOptions } from './options.js'
import { releaseWriteSignal, writeSignal } from './request-signal.js'
import { WriteBuffer } from './write-buffer.js'

export interface WriteBufferPluginOptions extends WriteBufferOptions {
  /** An existing Db: the plugin never closes its client. */
  db?: Db
  /** Or a URL: the plugin creates the MongoClient, owns it and closes it on app.close(). */
  url?: string
  /** Database name with `url` (default: the one in the URL). */
  database?: string
  clientOptions?: MongoClientOptions
}

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

const PLUGIN_KEYS = new Set(['db', 'url', 'database', 'clientOptions'])

/**
 * Thin shell over WriteBuffer: decorates `app.writeBuffer`, logs through `app.log`,
 * drains every queued write in `preClose` (before any onClose hook can close a client),
 * and closes the MongoClient in `onClose` only when it created it. Writes that arrive
 * while draining reject with WRITE_BUFFER_CLOSED (HTTP 503 if the route lets it through).
 */
const plugin: FastifyPluginAsync<WriteBufferPluginOptions> = async (app: FastifyInstance, options) => {
  const { db, url, database, clientOptions, ...rest } = options
  for (const key of Object.keys(rest)) {
    if (!PLUGIN_KEYS.has(key) && !WRITE_BUFFER_OPTION_NAMES.includes(key)) throw new InvalidOptionError(`unknown option ${key}`)
  }
  if ((db === undefined) === (url === undefined)) {
    throw new InvalidOptionError('fastify-write-buffer needs exactly one of `db` (a mongodb Db) or `url`')
  }
  if (url !== undefined && (typeof url !== 'string' || !/^mongodb(\+srv)?:\/\//.test(url))) {
    throw new InvalidOptionError(`url must be a mongodb:// or mongodb+srv:// string, got ${describe(url)}`)
  }
  if (database !== undefined && (typeof database !== 'string' || database === '')) {
    throw new InvalidOptionError(`database must be a non-empty string, got ${describe(database)}`)
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
    client = new MongoClient(url as string, clientOptions)
    await client.connect()
    target = client.db(database)
  }

  let buffer: WriteBuffer
  try {
    buffer = new WriteBuffer(target, { logger: app.log, ...rest })
  } catch (err) {
    await client?.close()
    throw err
  }
  app.decorate('writeBuffer', buffer)
  app.decorateRequest('writeSignal', { getter: writeSignal })
  app.addHook('onResponse', releaseWriteSignal)
  app.addHook('preClose', async () => { await buffer.close() })
  app.addHook('onClose', async () => {
    await buffer.close() // no-op when preClose ran; covers close() without preClose
    if (client !== undefined) await client.close()
  })
}

export const writeBufferPlugin = fp(plugin, { fastify: '5.x', name: 'fastify-write-buffer' })
export default writeBufferPlugin
