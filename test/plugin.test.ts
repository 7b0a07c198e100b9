import { execFile } from 'node:child_process'
import http from 'node:http'
import http2 from 'node:http2'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Fastify from 'fastify'
import type { Db, MongoClient } from 'mongodb'
import writeBuffer, { InvalidOptionError, WriteBuffer } from '../src/index.js'
import { countWriteCommands, mongoUri, openDb } from './helpers.js'

const run = promisify(execFile)
let client: MongoClient
let db: Db
let commands: ReturnType<typeof countWriteCommands>

beforeAll(async () => {
  ({ client, db } = await openDb('plugin'))
  commands = countWriteCommands(client)
})
afterAll(async () => { await client.close() })

describe('fastify plugin', () => {
  it('300 concurrent requests to a buffered insert route → 300 documents, few bulk commands', async () => {
    const app = Fastify()
    await app.register(writeBuffer, { db, lingerMs: 5 })
    app.post('/events', async (req, reply) => {
      const { insertedId } = await app.writeBuffer.collection('events').insertOne({ ...(req.body as object) })
      return reply.code(201).send({ id: insertedId })
    })
    const before = commands.counts.insert ?? 0
    const responses = await Promise.all(Array.from({ length: 300 }, (_, i) =>
      app.inject({ method: 'POST', url: '/events', payload: { i } })))
    expect(responses.every(r => r.statusCode === 201)).toBe(true)
    expect(await db.collection('events').countDocuments()).toBe(300)
    const sent = (commands.counts.insert ?? 0) - before
    expect(sent).toBeLessThanOrEqual(30)
    expect(app.writeBuffer).toBeInstanceOf(WriteBuffer)
    await app.close()
  })

  it('app.close() right after 100 un-awaited writes: all persisted, then the owned client is closed', async () => {
    const app = Fastify()
    await app.register(writeBuffer, { url: mongoUri(), database: db.databaseName, lingerMs: 60_000, clientOptions: { monitorCommands: true } })
    const order: string[] = []
    // onClose hooks run latest-registered first: this one before ours, the drain after it
    app.addHook('onClose', async () => { order.push('user onClose') })
    const ownedDb = app.writeBuffer.db
    const c = app.writeBuffer.collection('close_drain')
    const writes = Array.from({ length: 100 }, (_, i) => c.insertOne({ i }))
    await app.close()
    expect(await db.collection('close_drain').countDocuments()).toBe(100)
    expect((await Promise.allSettled(writes)).every(s => s.status === 'fulfilled')).toBe(true)
    expect(order).toEqual(['user onClose'])
    expect(app.writeBuffer.stats().pending).toBe(0)
    // the client the plugin created is closed
    await expect(ownedDb.collection('x').findOne({})).rejects.toThrow()
  })

  it('does not close a client it did not create', async () => {
    const app = Fastify()
    await app.register(writeBuffer, { db })
    await app.writeBuffer.collection('mine').insertOne({ a: 1 })
    await app.close()
    expect(await db.collection('mine').countDocuments()).toBe(1) // our client still works
  })

  it('writes arriving while closing get 503 with a clear code', async () => {
    const app = Fastify()
    await app.register(writeBuffer, { db })
    app.post('/w', async () => app.writeBuffer.collection('late').insertOne({ a: 1 }))
    await app.writeBuffer.close()
    const res = await app.inject({ method: 'POST', url: '/w' })
    expect(res.statusCode).toBe(503)
    expect(res.json()).toMatchObject({ code: 'WRITE_BUFFER_CLOSED' })
    await app.close()
  })

  it('buffer full → 503 with Retry-After', async () => {
    const app = Fastify()
    await app.register(writeBuffer, { db, maxPending: 1, onFull: 'reject', lingerMs: 200 })
    app.post('/w', async () => app.writeBuffer.collection('full').insertOne({ a: 1 }))
    const [a, b] = await Promise.all([app.inject({ method: 'POST', url: '/w' }), app.inject({ method: 'POST', url: '/w' })])
    const codes = [a?.statusCode, b?.statusCode].sort()
    expect(codes).toEqual([200, 503])
    const full = a?.statusCode === 503 ? a : b
    expect(full?.headers['retry-after']).toBe('1')
    expect(full?.json()).toMatchObject({ code: 'WRITE_BUFFER_FULL' })
    await app.close()
  })

  it('validates options at registration', async () => {
    for (const [opts, msg] of [
      [{}, /exactly one of `db`/],
      [{ db, url: 'mongodb://x' }, /exactly one of `db`/],
      [{ url: 'http://x' }, /url must be a mongodb/],
      [{ db, maxBatchSize: -1 }, /maxBatchSize/],
      [{ db, bogus: 1 }, /unknown option bogus/],
    ] as const) {
      const app = Fastify()
      await expect(app.register(writeBuffer, opts as never).ready()).rejects.toThrow(msg)
      await app.close().catch(() => {})
    }
  })

  it('a url that is not a mongodb:// one is refused without its credentials (user info masked, query left out)', async () => {
    for (const url of [' mongodb://admin:Hunter2@db.example:27017/', 'mongodb+srv//admin:Hunter2@db.example/', 'http://admin:Hunt@r2@db.example/?tlsCertificateKeyFilePassword=Kitten9']) {
      const app = Fastify()
      const err = await app.register(writeBuffer, { url }).then(() => null, (e: unknown) => e)
      expect(err).toMatchObject({ code: 'WRITE_BUFFER_INVALID_OPTION' })
      expect((err as Error).message).toMatch(/url must be a mongodb:\/\/ or mongodb\+srv:\/\/ string, got ".*\*\*\*@db\.example/)
      expect((err as Error).message).not.toMatch(/Hunter2|Hunt@r2|admin|Kitten9/)
      await app.close().catch(() => {})
    }
  })

  it('what the driver refuses (url, clientOptions, database) is an InvalidOptionError naming the option, the driver\'s error its cause, no credentials', async () => {
    const uri = new URL(mongoUri())
    const cases: Array<[Record<string, unknown>, RegExp, string]> = [
      [{ url: mongoUri(), database: 'a.b' }, /^database "a\.b" refused by the MongoDB driver: MongoInvalidArgumentError: Database names cannot contain the character '\.'$/, 'MongoInvalidArgumentError'],
      [{ url: `mongodb://${uri.host}/a.b` }, /^url ".*\/a\.b" \(its database name\) refused by the MongoDB driver: MongoInvalidArgumentError: /, 'MongoInvalidArgumentError'],
      [{ url: mongoUri(), clientOptions: { nonsense: 1 } }, /^clientOptions refused by the MongoDB driver: MongoParseError: option nonsense is not supported$/, 'MongoParseError'],
      [{ url: `mongodb://admin:Hunter2@${uri.host}/?unknownopt=1` }, /^url "mongodb:\/\/\*\*\*@.*\?\.\.\." refused by the MongoDB driver: MongoParseError: option unknownopt is not supported$/, 'MongoParseError'],
      [{ url: 'mongodb://admin:Hunter2@db.example:notaport/' }, /^url "mongodb:\/\/\*\*\*@db\.example:notaport\/" refused by the MongoDB driver: MongoRuntimeError: Unable to parse db\.example:notaport/, 'MongoRuntimeError'],
      // the driver echoes a malformed user name: masked, in the cause too (a logger prints the cause's message and stack)
      [{ url: 'mongodb://admin/x:Hunter2@db.example/' }, /^url "mongodb:\/\/\*\*\*@db\.example\/" refused by the MongoDB driver: MongoParseError: Username contains unescaped characters \*\*\*$/, 'MongoParseError'],
    ]
    for (const [opts, message, causeName] of cases) {
      const app = Fastify()
      const err = await app.register(writeBuffer, { ...opts, connectTimeoutMs: 0 } as never).then(() => null, (e: unknown) => e)
      expect(err).toBeInstanceOf(InvalidOptionError)
      expect(err).toMatchObject({ code: 'WRITE_BUFFER_INVALID_OPTION', outcome: 'not-sent' })
      expect((err as Error).message).toMatch(message)
      const cause = (err as Error).cause as Error
      expect(cause.name).toBe(causeName)
      for (const text of [(err as Error).message, cause.message, cause.stack]) expect(text).not.toMatch(/Hunter2|admin/)
      await app.close().catch(() => {})
    }
  })

  it('clientOptions that is not an object is refused before the driver sees it', async () => {
    for (const clientOptions of [null, 'maxPoolSize=5', [1]]) {
      const app = Fastify()
      await expect(app.register(writeBuffer, { url: mongoUri(), clientOptions } as never)).rejects.toMatchObject({
        code: 'WRITE_BUFFER_INVALID_OPTION', message: expect.stringMatching(/^clientOptions must be an object/) as unknown,
      })
      await app.close().catch(() => {})
    }
  })

  it('database or clientOptions with a given db is refused, not ignored: they apply only to the client the plugin makes from url', async () => {
    for (const [opts, key] of [[{ db, database: 'other' }, 'database'], [{ db, clientOptions: { maxPoolSize: 5 } }, 'clientOptions']] as const) {
      const app = Fastify()
      await expect(app.register(writeBuffer, opts as never)).rejects.toMatchObject({
        code: 'WRITE_BUFFER_INVALID_OPTION', message: `${key} only applies with \`url\` (the plugin makes no client for a given \`db\`)`,
      })
      await app.close().catch(() => {})
    }
    // a key given as undefined is no option (as elsewhere)
    const app = Fastify()
    await app.register(writeBuffer, { db, database: undefined, clientOptions: undefined } as never)
    await app.close()
  })

  it('logs one debug line per flush, nothing per write, and never document contents', async () => {
    const lines: Array<Record<string, unknown>> = []
    const stream = { write: (s: string) => { lines.push(JSON.parse(s) as Record<string, unknown>) } }
    const app = Fastify({ logger: { level: 'debug', stream } })
    await app.register(writeBuffer, { db, lingerMs: 5 })
    const c = app.writeBuffer.collection('logged')
    await Promise.all(Array.from({ length: 200 }, (_, i) => c.insertOne({ secret: `s3cr3t-${i}` })))
    const flushLines = lines.filter(l => l.msg === 'write buffer: flushed')
    expect(flushLines.length).toBe(app.writeBuffer.stats().batches)
    expect(flushLines.length).toBeLessThan(10)
    expect(JSON.stringify(lines)).not.toContain('s3cr3t')
    await app.close()
  })
})

describe('request-tied writes', () => {
  it('a write whose client went away before the flush is dropped, and the caller learns it', async () => {
    const app = Fastify()
    await app.register(writeBuffer, { db, lingerMs: 300 })
    let outcome: unknown
    let finish: () => void = () => {}
    const done = new Promise<void>(resolve => { finish = resolve })
    app.post('/slow', async (request) => {
      try {
        return await app.writeBuffer.collection('gone').insertOne({ a: 1 }, { signal: request.writeSignal })
      } catch (err) {
        outcome = err
        throw err
      } finally {
        finish()
      }
    })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const { port } = app.server.address() as { port: number }
    const ac = new AbortController()
    const req = fetch(`http://127.0.0.1:${port}/slow`, { method: 'POST', signal: ac.signal }).catch(() => undefined)
    await new Promise(resolve => setTimeout(resolve, 100))
    ac.abort()
    await req
    await done
    expect(outcome).toMatchObject({ code: 'WRITE_BUFFER_ABORTED', outcome: 'not-sent' })
    await app.writeBuffer.flush()
    expect(await db.collection('gone').countDocuments()).toBe(0)
    await app.close()
  })

  it('a request that completes leaves its keep-alive socket without our listener', async () => {
    const app = Fastify()
    await app.register(writeBuffer, { db })
    app.post('/ok', async (request) => app.writeBuffer.collection('kept').insertOne({ a: 1 }, { signal: request.writeSignal }))
    await app.listen({ port: 0, host: '127.0.0.1' })
    const { port } = app.server.address() as { port: number }
    for (let i = 0; i < 20; i++) expect((await fetch(`http://127.0.0.1:${port}/ok`, { method: 'POST' })).status).toBe(200)
    expect(await db.collection('kept').countDocuments()).toBe(20)
    await app.close()
  })

  it('a request answered normally does not abort, even when its connection closes while an earlier async onResponse hook runs', async () => {
    const app = Fastify()
    app.addHook('onResponse', async () => { await new Promise(resolve => setTimeout(resolve, 50)) }) // a metrics or audit hook
    await app.register(writeBuffer, { db, lingerMs: 200 })
    const signals: AbortSignal[] = []
    app.post('/track', async (request) => {
      signals.push(request.writeSignal)
      app.writeBuffer.collection('tracked').insertOne({ at: new Date() }, { detached: true, signal: request.writeSignal })
      return { ok: true }
    })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const { port } = app.server.address() as { port: number }
    const status = await new Promise(resolve => {
      const r = http.request({ port, path: '/track', method: 'POST', headers: { connection: 'close' } }, res => { res.resume(); res.on('end', () => { resolve(res.statusCode) }) })
      r.end()
    })
    expect(status).toBe(200)
    await new Promise(resolve => setTimeout(resolve, 100)) // the socket has closed, the hooks have run
    expect(signals.map(s => s.aborted)).toEqual([false])
    await app.writeBuffer.flush()
    expect(await db.collection('tracked').countDocuments()).toBe(1)
    expect(app.writeBuffer.stats().failedOps).toBe(0)
    await app.close()
  })

  it('HTTP/2: a normal response does not abort the signal; a stream the client cancels does', async () => {
    const app = Fastify({ http2: true })
    await app.register(writeBuffer, { db, lingerMs: 300 })
    const signals: AbortSignal[] = []
    let caught: (err: unknown) => void = () => {}
    const cancelled = new Promise<unknown>(resolve => { caught = resolve })
    let started: () => void = () => {}
    const inHandler = new Promise<void>(resolve => { started = resolve })
    app.post('/ok', async (request) => { signals.push(request.writeSignal); return { ok: true } })
    app.post('/slow', async (request) => {
      started()
      try {
        return await app.writeBuffer.collection('h2gone').insertOne({ a: 1 }, { signal: request.writeSignal })
      } catch (err) {
        caught(err)
        throw err
      }
    })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const { port } = app.server.address() as { port: number }
    const session = http2.connect(`http://127.0.0.1:${port}`)
    for (let i = 0; i < 3; i++) {
      await new Promise<void>((resolve, reject) => {
        const r = session.request({ ':path': '/ok', ':method': 'POST' })
        r.resume()
        r.on('end', () => { resolve() })
        r.on('error', reject)
        r.end()
      })
    }
    const slow = session.request({ ':path': '/slow', ':method': 'POST' })
    slow.on('error', () => {})
    slow.end()
    await inHandler
    slow.close(http2.constants.NGHTTP2_CANCEL)
    expect(await cancelled).toMatchObject({ code: 'WRITE_BUFFER_ABORTED', outcome: 'not-sent' })
    expect(signals.map(s => s.aborted)).toEqual([false, false, false])
    session.close()
    await app.close()
    expect(await db.collection('h2gone').countDocuments()).toBe(0)
  })

  it('connectTimeoutMs at or past Fastify\'s pluginTimeout is refused at registration (its timeout names no host)', async () => {
    const app = Fastify({ pluginTimeout: 2_000 })
    await expect(app.register(writeBuffer, { db, connectTimeoutMs: 2_000 })).rejects.toMatchObject({ code: 'WRITE_BUFFER_INVALID_OPTION' })
    await app.close().catch(() => {})
  })

  it('a failed registration (registered twice) leaves no client of its own open: the process can exit', async () => {
    const script = `
      const { default: Fastify } = await import('fastify')
      const { default: writeBuffer } = await import(${JSON.stringify(new URL('../dist/index.js', import.meta.url).href)})
      const app = Fastify()
      await app.register(writeBuffer, { url: ${JSON.stringify(mongoUri())}, database: 'fwb_dup' })
      try { await app.register(writeBuffer, { url: ${JSON.stringify(mongoUri())}, database: 'fwb_dup' }) } catch (err) { console.log(err.code) }
      await app.close().catch(() => {})
    `
    const t0 = Date.now()
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: fileURLToPath(new URL('..', import.meta.url)), timeout: 20_000 })
    expect(stdout.trim()).toBe('FST_ERR_DEC_ALREADY_PRESENT')
    expect(Date.now() - t0).toBeLessThan(15_000)
  })

  it('start-up against an unreachable server fails within connectTimeoutMs, naming the host but not the credentials', async () => {
    const app = Fastify()
    const t0 = Date.now()
    const err = await app.register(writeBuffer, { url: 'mongodb://alice:s3cret@127.0.0.1:1/app', connectTimeoutMs: 800 }).then(() => null, (e: unknown) => e)
    expect(Date.now() - t0).toBeLessThan(5_000)
    expect(err).toMatchObject({ code: 'WRITE_BUFFER_CONNECT_FAILED' })
    expect((err as Error).message).toMatch(/127\.0\.0\.1:1/)
    expect((err as Error).message).toMatch(/ECONNREFUSED/) // the driver's cause, from its server monitoring
    expect((err as Error).message).not.toMatch(/s3cret|alice/)
    await app.close().catch(() => {})
  })

  it('start-up with a given Db whose server is unreachable fails the same way', async () => {
    const { MongoClient } = await import('mongodb')
    const unreachable = new MongoClient('mongodb://127.0.0.1:1/', { serverSelectionTimeoutMS: 30_000 })
    const app = Fastify()
    const t0 = Date.now()
    const err = await app.register(writeBuffer, { db: unreachable.db('x'), connectTimeoutMs: 500 }).then(() => null, (e: unknown) => e)
    expect(Date.now() - t0).toBeLessThan(5_000)
    expect(err).toMatchObject({ code: 'WRITE_BUFFER_CONNECT_FAILED' })
    expect((err as Error).message).toMatch(/connectTimeoutMs \(500 ms\)/)
    await unreachable.close()
    await app.close().catch(() => {})
  })
})
