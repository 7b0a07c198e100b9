import { spawn, type ChildProcess } from 'node:child_process'
import { freePort, listeningAddress } from './support/child-server.js'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { MongoClient, ObjectId, type Db } from 'mongodb'
import type { FastifyInstance } from 'fastify'
import { ErrorCodes, WriteBufferError } from '../src/index.js'
// @ts-expect-error plain ESM example app (run `npm run build` first: it imports dist/)
import { buildApp } from '../examples/fastify-app/app.mjs'
// @ts-expect-error plain ESM example module
import { canonicalizeUsername } from '../examples/fastify-app/username.mjs'

const INJECT_DB = 'fwb_example_app'
const SERVER_DB = 'fwb_example_app_server'
const serverScript = fileURLToPath(new URL('../examples/fastify-app/server.mjs', import.meta.url))
/** Options for the in-process apps below (see the first beforeAll for why). */
const QUICK = {
  rateLimits: { loginPerAddress: { max: 10_000, timeWindow: 60_000 }, registerPerAddress: { max: 10_000, timeWindow: 60_000 } },
  scrypt: { logN: 12, r: 8, p: 1 },
}

let client: MongoClient

beforeAll(async () => {
  client = await new MongoClient(inject('mongoUri')).connect()
  await client.db(INJECT_DB).dropDatabase()
  await client.db(SERVER_DB).dropDatabase()
})
afterAll(async () => { await client?.close() })

function eventById (db: Db, id: string): Promise<unknown> {
  return db.collection('events').findOne({ _id: new ObjectId(id) })
}

describe('example app, through app.inject', () => {
  let app: FastifyInstance
  const post = (url: string, payload: unknown) => app.inject({ method: 'POST', url, payload: payload as object })

  beforeAll(async () => {
    // Every app.inject request comes from 127.0.0.1, and this suite sends dozens of them: the
    // per-address limits are raised out of its way (test/example-app-login.test.ts tests the
    // limits themselves, and the scrypt cost). scrypt at N = 2^12 keeps these tests quick.
    app = await buildApp({ ...QUICK, mongoUrl: inject('mongoUri'), database: INJECT_DB, logger: false, exposeStats: true })
    await app.ready()
  })
  afterAll(async () => { await app?.close() })

  it.each([
    ['register, username as $gt', '/register', { username: { $gt: '' }, password: 'long enough' }],
    ['register, username as an object', '/register', { username: { first: 'alice' }, password: 'long enough' }],
    ['register, username as an array', '/register', { username: ['alice'], password: 'long enough' }],
    ['register, username as a number', '/register', { username: 12345, password: 'long enough' }],
    ['register, username with $', '/register', { username: '$where', password: 'long enough' }],
    ['register, extra key', '/register', { username: 'mallory', password: 'long enough', admin: true }],
    ['register, extra $-key', '/register', { username: 'mallory', password: 'long enough', $where: '1' }],
    ['register, short password', '/register', { username: 'mallory', password: 'short' }],
    ['login, username $ne', '/login', { username: { $ne: null }, password: 'long enough' }],
    ['login, username $regex', '/login', { username: { $regex: '.*' }, password: 'long enough' }],
    ['login, password $gt', '/login', { username: 'alice', password: { $gt: '' } }],
    ['login, missing password', '/login', { username: 'alice' }],
    ['login, extra key', '/login', { username: 'alice', password: 'long enough', _id: 'x' }],
    ['events, type as $gt', '/events', { type: { $gt: '' } }],
    ['events, payload not an object', '/events', { type: 'click', payload: 'x' }],
    ['events, payload $-key', '/events', { type: 'click', payload: { a: [{ $set: { admin: true } }] } }],
    ['events, extra key', '/events', { type: 'click', at: '2020-01-01' }],
  ])('400: %s', async (_name, url, body) => {
    const res = await post(url, body)
    expect(res.statusCode).toBe(400)
  })

  it('400: prototype poisoning', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/register',
      headers: { 'content-type': 'application/json' },
      payload: '{"username":"mallory","password":"long enough","__proto__":{"admin":true}}',
    })
    expect(res.statusCode).toBe(400)
  })

  describe('deeply nested bodies are a 400, never a 500', () => {
    const nested = (open: string, close: string, levels: number): string => open.repeat(levels) + '1' + close.repeat(levels)
    const raw = (url: string, payload: string, contentType = 'application/json') =>
      app.inject({ method: 'POST', url, headers: { 'content-type': contentType }, payload })

    it.each([
      // 2,500 levels: under /events' 16 KiB body limit, far past the 32 the scan allows
      ['events, 2,500 nested objects', '/events', '{"type":"x","payload":' + nested('{"a":', '}', 2_500) + '}'],
      ['events, 5,000 nested arrays', '/events', '{"type":"x","payload":{"a":' + nested('[', ']', 5_000) + '}}'],
      ['events, 300 nested objects (deeper than BSON takes)', '/events', '{"type":"x","payload":' + nested('{"a":', '}', 300) + '}'],
      ['register, 10,000 nested arrays as the username', '/register', '{"username":' + nested('[', ']', 10_000) + ',"password":"long enough"}'],
      ['login, 10,000 nested objects as an extra key', '/login', '{"username":"alice","password":"long enough","x":' + nested('{"a":', '}', 10_000) + '}'],
    ])('%s', async (_name, url, payload) => {
      const res = await raw(url, payload)
      expect(res.statusCode).toBe(400)
      expect(res.json()).toMatchObject({ statusCode: 400, error: 'Bad Request' })
      expect(res.body).not.toMatch(/stack|Maximum call|serialized|BSON|at \//i)
    })

    it('with a charset parameter too', async () => {
      const res = await raw('/events', '{"type":"x","payload":' + nested('{"a":', '}', 2_500) + '}', 'application/json; charset=utf-8')
      expect(res.statusCode).toBe(400)
    })

    it('a payload of 31 levels (32 with the body) is stored; brackets inside strings do not count', async () => {
      const deep = await raw('/events', '{"type":"deep","payload":' + nested('{"a":', '}', 31) + '}')
      expect(deep.statusCode).toBe(202)
      const text = await raw('/events', JSON.stringify({ type: 'text', payload: { s: '{['.repeat(100) + '\\"' + '[{'.repeat(100) } }))
      expect(text.statusCode).toBe(202)
      expect(await eventById(client.db(INJECT_DB), text.json().id)).toMatchObject({ payload: { s: '{['.repeat(100) + '\\"' + '[{'.repeat(100) } })
    })
  })

  describe('usernames are one user whatever their case or Unicode form', () => {
    it('Carol, then carol / CAROL / fullwidth ＣＡＲＯＬ → 409; login in any of them works', async () => {
      expect((await post('/register', { username: 'Carol', password: 'correct horse' })).statusCode).toBe(201)
      for (const username of ['carol', 'CAROL', 'ＣＡＲＯＬ']) {
        expect((await post('/register', { username, password: 'another one' })).statusCode, username).toBe(409)
      }
      const login = await post('/login', { username: 'cArOl', password: 'correct horse' })
      expect(login.statusCode).toBe(200)
      expect((await post('/login', { username: 'ＣＡＲＯＬ', password: 'correct horse' })).json()).toEqual({ ok: true, logins: 2 })
      const stored = await client.db(INJECT_DB).collection('users').find({ username: /^carol$/i }).toArray()
      expect(stored.map(u => u.username)).toEqual(['carol'])
    })

    it('josé with a precomposed é (U+00E9), then with e + U+0301 → 409; login with either works', async () => {
      const nfc = 'jos\u00e9'
      const nfd = 'jose\u0301'
      expect(nfc).not.toBe(nfd)
      expect((await post('/register', { username: nfc, password: 'correct horse' })).statusCode).toBe(201)
      expect((await post('/register', { username: nfd, password: 'another one' })).statusCode).toBe(409)
      expect((await post('/register', { username: 'JOSE\u0301', password: 'another one' })).statusCode).toBe(409)
      expect((await post('/login', { username: nfd, password: 'correct horse' })).statusCode).toBe(200)
      expect((await post('/login', { username: 'JOS\u00c9', password: 'correct horse' })).statusCode).toBe(200)
      await app.writeBuffer.flush() // the login bookkeeping is detached and lingers
      const stored = await client.db(INJECT_DB).collection('users').findOne({ username: nfc })
      expect(stored).toMatchObject({ username: nfc, logins: 2 })
      expect(await client.db(INJECT_DB).collection('users').countDocuments({ username: nfd })).toBe(0)
    })

    it.each([
      ['a fullwidth dollar (NFKC: $)', '\uff04where'],
      ['a fullwidth $gt (NFKC: $gt)', '＄gt'],
      ['too short once normalised', 'ab'],
      ['a space', 'bad name'],
    ])('400: %s', async (_name, username) => {
      expect((await post('/register', { username, password: 'long enough' })).statusCode).toBe(400)
    })
  })

  it('register → 201, same username → 409', async () => {
    const res = await post('/register', { username: 'alice', password: 'correct horse' })
    expect(res.statusCode).toBe(201)
    const { id } = res.json()
    expect(id).toMatch(/^[0-9a-f]{24}$/)
    const stored = await client.db(INJECT_DB).collection('users').findOne({ _id: new ObjectId(id as string) })
    expect(stored).toMatchObject({ username: 'alice', logins: 0 })
    expect(stored?.passwordHash).toMatch(/^\$scrypt\$ln=12,r=8,p=1\$[A-Za-z0-9+/]{22}==\$[A-Za-z0-9+/]{86}==$/) // its parameters, salt and hash
    expect(stored).not.toHaveProperty('salt')
    expect(JSON.stringify(stored)).not.toContain('correct horse')

    const again = await post('/register', { username: 'alice', password: 'another one' })
    expect(again.statusCode).toBe(409)
  })

  it('login → 200 and logins counts up; no hash in the reply', async () => {
    const first = await post('/login', { username: 'alice', password: 'correct horse' })
    expect(first.statusCode).toBe(200)
    expect(first.json()).toEqual({ ok: true, logins: 1 })
    const second = await post('/login', { username: 'alice', password: 'correct horse' })
    expect(second.json()).toEqual({ ok: true, logins: 2 })
    expect(second.body).not.toMatch(/passwordHash|salt/)
    await app.writeBuffer.flush() // the login bookkeeping is detached and lingers
    const stored = await client.db(INJECT_DB).collection('users').findOne({ username: 'alice' })
    expect(stored).toMatchObject({ logins: 2, lastLoginAt: expect.any(Date) })
    expect(await client.db(INJECT_DB).collection('audit').countDocuments({ kind: 'login', userId: stored?._id })).toBe(2)
  })

  it('GET /metrics: Prometheus text with the buffer\'s counters and latency quantiles', async () => {
    const res = await app.inject({ method: 'GET', url: '/metrics' })
    expect(res.statusCode).toBe(200)
    expect(res.headers['content-type']).toMatch(/^text\/plain/)
    expect(res.body).toMatch(/^fwb_pending_writes \d+$/m)
    expect(res.body).toMatch(/^fwb_bulk_writes_total [1-9]\d*$/m)
    expect(res.body).toMatch(/^fwb_round_trip_ms\{quantile="0.99"\} [\d.]+$/m)
    expect(res.body).toMatch(/^fwb_queue_wait_ms_count [1-9]\d*$/m)
    expect(res.body).toMatch(/^fwb_in_flight_limit [1-9]\d*$/m)
    expect(res.body).toMatch(/^fwb_shed_writes_total \d+$/m)
    expect(res.body).toMatch(/^fwb_overload_pace_writes_per_second 0$/m) // no overload here: no pace
  })

  it('401 with one message for a wrong password and an unknown user', async () => {
    const wrong = await post('/login', { username: 'alice', password: 'wrong horse' })
    const unknown = await post('/login', { username: 'nobody', password: 'wrong horse' })
    expect(wrong.statusCode).toBe(401)
    expect(unknown.statusCode).toBe(401)
    expect(wrong.json().message).toBe(unknown.json().message)
  })

  it('events → 202, stored by the time the reply is sent', async () => {
    const res = await post('/events', { type: 'click', payload: { button: 'buy', at: [1, { x: 2 }] } })
    expect(res.statusCode).toBe(202)
    const { id } = res.json()
    expect(await eventById(client.db(INJECT_DB), id)).toMatchObject({
      type: 'click', payload: { button: 'buy', at: [1, { x: 2 }] }, at: expect.any(Date),
    })
  })

  it('GET /stats reports the buffer and the cache', async () => {
    const res = await app.inject({ method: 'GET', url: '/stats' })
    expect(res.statusCode).toBe(200)
    const { buffer, cache } = res.json()
    expect(buffer).toMatchObject({ pending: 0, flushedOps: expect.any(Number) })
    expect(buffer.flushedOps).toBeGreaterThanOrEqual(4)
    expect(cache).toMatchObject({ hits: expect.any(Number), misses: expect.any(Number) })
  })

  it('a write buffer 503 keeps its code and Retry-After, never the driver\'s message (hosts, errors)', async () => {
    const fresh: FastifyInstance = await buildApp({ ...QUICK, mongoUrl: inject('mongoUri'), database: INJECT_DB })
    try {
      fresh.get('/down', async () => {
        throw new WriteBufferError(ErrorCodes.BATCH_FAILED, 'bulkWrite to events failed (MongoServerSelectionError: connect ECONNREFUSED 10.0.0.7:27017)', 'unknown', 1)
      })
      fresh.get('/full', async () => { throw new WriteBufferError(ErrorCodes.FULL, 'write buffer is full (100000 pending)', 'not-sent', 0) })
      const down = await fresh.inject({ method: 'GET', url: '/down' })
      expect(down.statusCode).toBe(503)
      expect(down.json()).toMatchObject({ code: 'WRITE_BUFFER_BATCH_FAILED' })
      expect(down.body).not.toMatch(/10\.0\.0\.7|ECONNREFUSED|Mongo/)
      const full = await fresh.inject({ method: 'GET', url: '/full' })
      expect(full.statusCode).toBe(503)
      expect(full.headers['retry-after']).toBe('1')
      expect(full.json()).toMatchObject({ code: 'WRITE_BUFFER_FULL' })
    } finally {
      await fresh.close()
    }
  })

  it('a huge username is refused without being normalised first (NFKC can grow it 18-fold)', async () => {
    const huge = '\uFDFA'.repeat(300_000)
    const request = { body: { username: huge } }
    await canonicalizeUsername(request)
    expect(request.body.username).toBe(huge) // left for the schema to refuse, not expanded to 5.4 M characters
    const short = { body: { username: '\uFDFA' } }
    await canonicalizeUsername(short)
    expect(short.body.username).toHaveLength(18) // what NFKC does to it
    expect((await post('/login', { username: huge, password: 'long enough' })).statusCode).toBe(400)
  })

  it('GET /stats is not registered without exposeStats', async () => {
    const hidden: FastifyInstance = await buildApp({ ...QUICK, mongoUrl: inject('mongoUri'), database: INJECT_DB })
    try {
      expect((await hidden.inject({ method: 'GET', url: '/stats' })).statusCode).toBe(404)
    } finally {
      await hidden.close()
    }
  })
})

describe('example server, as a child process over HTTP', () => {
  let child: ChildProcess | undefined

  afterAll(() => {
    if (child !== undefined && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })

  it('serves register/login/events, then drains and exits 0 on SIGTERM', async () => {
    const port = await freePort()
    const output: string[] = []
    child = spawn(process.execPath, [serverScript], {
      env: { ...process.env, MONGODB_URI: inject('mongoUri'), FWB_DB: SERVER_DB, PORT: String(port), NODE_ENV: 'test', REDIS_URL: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>
    const base = await listeningAddress(child, output)
    expect(base).toBe(`http://127.0.0.1:${port}`)
    expect(output.join('\n')).toMatch(/rate limits counted in memory: per instance/) // no REDIS_URL: said at startup

    const post = async (path: string, body: unknown): Promise<{ status: number, json: any }> => {
      const res = await fetch(base + path, {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
      })
      return { status: res.status, json: await res.json() }
    }

    expect((await post('/register', { username: 'bob', password: 'hunter2hunter2' })).status).toBe(201)
    expect(await post('/login', { username: 'bob', password: 'hunter2hunter2' })).toEqual({ status: 200, json: { ok: true, logins: 1 } })
    expect((await post('/login', { username: 'bob', password: 'hunter2' })).status).toBe(400) // under 8 characters
    expect((await post('/login', { username: { $gt: '' }, password: 'hunter2hunter2' })).status).toBe(400)
    const event = await post('/events', { type: 'signup', payload: { via: 'test' } })
    expect(event.status).toBe(202)
    expect((await fetch(base + '/stats')).status).toBe(200)

    child.kill('SIGTERM')
    const [code, signal] = await exited
    expect({ code, signal }, output.join('\n')).toEqual({ code: 0, signal: null })
    expect(output.join('\n')).toMatch(/shutting down/)
    expect(await eventById(client.db(SERVER_DB), event.json.id)).toMatchObject({ type: 'signup', payload: { via: 'test' } })
  })
})
