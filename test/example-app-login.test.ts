import { randomBytes, scryptSync } from 'node:crypto'
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it, vi } from 'vitest'
import { MongoClient, type Collection } from 'mongodb'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { freePort } from './support/child-server.js'
// @ts-expect-error plain ESM example app (run `npm run build` first: it imports dist/)
import { buildApp } from '../examples/fastify-app/app.mjs'
// @ts-expect-error plain ESM example module
import { RATE_LIMITS, rateLimitSettings } from '../examples/fastify-app/rate-limits.mjs'
// @ts-expect-error plain ESM example module
import { SCRYPT, isOlder, parseStored } from '../examples/fastify-app/password.mjs'

/**
 * The example's login path as a security review reads it: rate limits (per address, per
 * username, shared by instances over a real Redis), one scrypt per login whoever asks, and
 * hashes that record their parameters and are raised on login. Real server, real Redis.
 */

// Every scrypt the example runs, with its N: the example imports node:crypto through vitest,
// which hands it this wrapper (the real scrypt behind it). The test's own hashes are scryptSync.
const scryptNs = vi.hoisted(() => [] as number[])
vi.mock('node:crypto', async importOriginal => {
  const actual = await importOriginal<typeof import('node:crypto')>()
  const scrypt = (...args: Parameters<typeof actual.scrypt>): void => {
    scryptNs.push((args[3] as { N: number }).N)
    actual.scrypt(...args)
  }
  return { ...actual, default: { ...actual, scrypt }, scrypt }
})

const DB = 'fwb_example_login'
/** scrypt for the tests that count requests, not hashes: N = 2^12 keeps dozens of them quick */
const QUICK_SCRYPT = { logN: 12, r: 8, p: 1 }
const RUN = `${process.pid}-${Date.now()}`

let client: MongoClient
let users: Collection
const apps: FastifyInstance[] = []

async function app (options: Record<string, unknown> = {}): Promise<FastifyInstance> {
  const a: FastifyInstance = await buildApp({ mongoUrl: inject('mongoUri'), database: DB, scrypt: QUICK_SCRYPT, ...options })
  apps.push(a)
  await a.ready()
  return a
}

function login (a: FastifyInstance, username: string, password: string, remoteAddress = '10.0.0.1'): Promise<LightMyRequestResponse> {
  return a.inject({ method: 'POST', url: '/login', remoteAddress, payload: { username, password } })
}

function register (a: FastifyInstance, username: string, password: string, remoteAddress = '10.0.0.1'): Promise<LightMyRequestResponse> {
  return a.inject({ method: 'POST', url: '/register', remoteAddress, payload: { username, password } })
}

/** A 429 as @fastify/rate-limit answers it: Retry-After in whole seconds, within the window. */
function expectLimited (res: LightMyRequestResponse, windowMs: number): void {
  expect(res.statusCode, res.body).toBe(429)
  expect(res.json()).toMatchObject({ statusCode: 429, error: 'Too Many Requests' })
  const retryAfter = Number(res.headers['retry-after'])
  expect(Number.isInteger(retryAfter) && retryAfter > 0 && retryAfter <= windowMs / 1000, `Retry-After: ${String(res.headers['retry-after'])}`).toBe(true)
  expect(res.headers['x-ratelimit-remaining']).toBe('0')
}

/** The setup's Redis; a clear failure when there is none. */
function redisUrl (): string {
  const url = inject('redisUrl')
  if (url === '') throw new Error(`the shared rate-limit tests need a real Redis: ${inject('redisError')}`)
  return url
}

beforeAll(async () => {
  client = await new MongoClient(inject('mongoUri')).connect()
  await client.db(DB).dropDatabase()
  users = client.db(DB).collection('users')
})
afterAll(async () => {
  for (const a of apps) await a.close()
  await client?.close()
})
beforeEach(() => { scryptNs.length = 0 })

describe('rate limits (@fastify/rate-limit)', () => {
  const perUser = RATE_LIMITS.loginPerUsername as { max: number, timeWindow: number }

  it('the example\'s limits: 20 logins per username per 15 minutes, 30 per address per minute, 10 registrations per address per hour, 6,000 events per address per minute', () => {
    expect(RATE_LIMITS).toEqual({
      loginPerAddress: { max: 30, timeWindow: 60_000 },
      loginPerUsername: { max: 20, timeWindow: 900_000 },
      registerPerAddress: { max: 10, timeWindow: 3_600_000 },
      eventsPerAddress: { max: 6000, timeWindow: 60_000 },
    })
  })

  it('/events, which needs no account: past the per-address limit a 429 (other addresses go on); a body past 16 KiB a 413, nothing stored', async () => {
    const a = await app({ rateLimits: { eventsPerAddress: { max: 3, timeWindow: 60_000 } } })
    const track = (ip: string, payload: object = { type: 'click' }) => a.inject({ method: 'POST', url: '/events', payload, remoteAddress: ip })
    for (let i = 0; i < 3; i++) expect((await track('10.6.0.1')).statusCode).toBe(202)
    expectLimited(await track('10.6.0.1'), 60_000)
    expect((await track('10.6.0.2')).statusCode).toBe(202)
    const big = await track('10.6.0.3', { type: 'big', payload: { s: 'x'.repeat(17 * 1024) } })
    expect(big.statusCode).toBe(413)
    expect(await a.writeBuffer.collection('events').collection.countDocuments({ type: 'big' })).toBe(0)
  })

  it('the 21st failed login for one username within the window is a 429, from 21 different addresses, before any scrypt; other names go on', async () => {
    const a = await app()
    expect((await register(a, 'victim', 'correct horse')).statusCode).toBe(201)
    for (let i = 1; i <= perUser.max; i++) {
      expect((await login(a, 'victim', 'wrong guess ' + String(i), `10.1.0.${i}`)).statusCode, `attempt ${i}`).toBe(401)
    }
    scryptNs.length = 0
    expectLimited(await login(a, 'victim', 'wrong guess 21', '10.1.0.21'), perUser.timeWindow)
    expectLimited(await login(a, 'VICTIM', 'correct horse', '10.1.0.22'), perUser.timeWindow) // any form of the name; even the right password
    expect(scryptNs).toEqual([]) // a limited attempt costs no scrypt
    expect((await login(a, 'bystander', 'wrong guess', '10.1.0.21')).statusCode).toBe(401)
  })

  it('the 31st login from one address within a minute is a 429, whatever the usernames; another address goes on', async () => {
    const a = await app()
    const { max, timeWindow } = RATE_LIMITS.loginPerAddress as { max: number, timeWindow: number }
    for (let i = 1; i <= max; i++) {
      expect((await login(a, `sprayed${i}`, 'password1', '10.2.0.1')).statusCode, `attempt ${i}`).toBe(401)
    }
    expectLimited(await login(a, 'sprayed0', 'password1', '10.2.0.1'), timeWindow)
    expect((await login(a, 'sprayed0', 'password1', '10.2.0.2')).statusCode).toBe(401)
  })

  it('the 11th registration from one address within an hour is a 429', async () => {
    const a = await app()
    const { max, timeWindow } = RATE_LIMITS.registerPerAddress as { max: number, timeWindow: number }
    for (let i = 1; i <= max; i++) {
      expect((await register(a, `newcomer${i}`, 'long enough', '10.3.0.1')).statusCode, `registration ${i}`).toBe(201)
    }
    expectLimited(await register(a, 'newcomer0', 'long enough', '10.3.0.1'), timeWindow)
    expect(await users.countDocuments({ username: 'newcomer0' })).toBe(0)
    expect((await register(a, 'newcomer0', 'long enough', '10.3.0.2')).statusCode).toBe(201)
  })

  it('two instances sharing Redis share the per-username count: 10 failures on each, the 21st is a 429 on both', async () => {
    const shared = { redisUrl: redisUrl(), redisPrefix: `fwb-example-test-${RUN}` }
    const a = await app(shared)
    const b = await app(shared)
    expect((await register(a, 'shared-victim', 'correct horse')).statusCode).toBe(201)
    for (let i = 1; i <= perUser.max; i++) {
      const res = await login(i % 2 === 0 ? a : b, 'shared-victim', 'wrong guess', `10.4.0.${i}`)
      expect(res.statusCode, `attempt ${i}`).toBe(401)
    }
    expectLimited(await login(a, 'shared-victim', 'wrong guess', '10.4.0.21'), perUser.timeWindow)
    expectLimited(await login(b, 'shared-victim', 'correct horse', '10.4.0.22'), perUser.timeWindow)
  })

  it('a Redis that cannot be reached fails /login and /register closed (a 500 with no detail), not open; /events goes on uncounted; close() still returns', async () => {
    const a = await app({ redisUrl: `redis://127.0.0.1:${await freePort()}`, redisPrefix: `fwb-example-test-${RUN}-down` })
    scryptNs.length = 0
    for (const res of [await login(a, 'anyone', 'correct horse'), await register(a, 'anyone', 'correct horse')]) {
      expect(res.statusCode, res.body).toBe(500)
      expect(res.json().message).toBe('Internal Server Error')
    }
    expect(scryptNs).toEqual([]) // refused before any work
    expect((await a.inject({ method: 'POST', url: '/events', payload: { type: 'still-up' } })).statusCode).toBe(202)
    apps.splice(apps.indexOf(a), 1)
    await a.close()
  })

  it('(control) two instances without Redis count on their own: after 10 failures on each, the 21st is still a 401', async () => {
    const a = await app()
    const b = await app()
    expect((await register(a, 'split-victim', 'correct horse')).statusCode).toBe(201)
    for (let i = 1; i <= perUser.max; i++) {
      expect((await login(i % 2 === 0 ? a : b, 'split-victim', 'wrong guess', `10.5.0.${i}`)).statusCode, `attempt ${i}`).toBe(401)
    }
    expect((await login(a, 'split-victim', 'wrong guess', '10.5.0.21')).statusCode).toBe(401)
  })
})

describe('scrypt: one per login, parameters recorded and raised', () => {
  const N = (logN: number): number => 2 ** logN

  it('an unknown user, a wrong password and a right one each cost exactly one scrypt, at the current parameters', async () => {
    const a = await app({ scrypt: undefined }) // the example's own setting
    expect(SCRYPT).toEqual({ logN: 17, r: 8, p: 1 })
    expect((await register(a, 'counted', 'correct horse')).statusCode).toBe(201)
    expect(scryptNs).toEqual([N(17), N(17)]) // the unknown-user stand-in, made at startup; the registration
    for (const [username, password, status] of [['nobody-here', 'correct horse', 401], ['counted', 'wrong horse', 401], ['counted', 'correct horse', 200]] as const) {
      scryptNs.length = 0
      expect((await login(a, username, password)).statusCode, `${username} / ${password}`).toBe(status)
      expect(scryptNs, `${username} / ${password}`).toEqual([N(17)])
    }
  })

  it('a login whose stored parameters are older is rehashed at the current ones (Node-default pair and PHC string alike); a wrong password changes nothing', async () => {
    const a = await app({ scrypt: { logN: 15, r: 8, p: 1 } })
    const salt = randomBytes(16)
    // the format before parameters were recorded: Node's defaults (N = 2^14), salt on its own
    await users.insertOne({ username: 'legacy', salt: salt.toString('base64'), passwordHash: scryptSync('correct horse', salt, 64).toString('base64'), logins: 0 })
    const old = `$scrypt$ln=11,r=8,p=1$${salt.toString('base64')}$${scryptSync('correct horse', salt, 64, { N: N(11) }).toString('base64')}`
    await users.insertOne({ username: 'older', passwordHash: old, logins: 0 })

    expect((await login(a, 'older', 'wrong horse')).statusCode).toBe(401)
    await a.writeBuffer.flush()
    expect(await users.findOne({ username: 'older' })).toMatchObject({ passwordHash: old })

    for (const [username, storedN] of [['legacy', N(14)], ['older', N(11)]] as const) {
      scryptNs.length = 0
      expect((await login(a, username, 'correct horse')).statusCode, username).toBe(200)
      expect(scryptNs, username).toEqual([storedN, N(15)]) // the check at the stored cost, the new hash
      await a.writeBuffer.flush() // the rehash is detached
      const stored = await users.findOne({ username })
      expect(stored?.passwordHash, username).toMatch(/^\$scrypt\$ln=15,r=8,p=1\$/)
      expect(stored, username).not.toHaveProperty('salt')

      scryptNs.length = 0 // the next login checks the new hash once, and rehashes nothing
      expect((await login(a, username, 'correct horse')).statusCode, username).toBe(200)
      expect((await login(a, username, 'wrong horse')).statusCode, username).toBe(401)
      expect(scryptNs, username).toEqual([N(15), N(15)])
      await a.writeBuffer.flush()
      expect(await users.findOne({ username }), username).toMatchObject({ passwordHash: stored?.passwordHash })
    }
  })

  it('a stored hash asking for more than the ceiling (N = 2^21) is refused, not computed: a 500, with no detail', async () => {
    const a = await app()
    await users.insertOne({ username: 'hostile', passwordHash: '$scrypt$ln=21,r=8,p=1$AAAAAAAAAAAAAAAAAAAAAA==$AAAA', logins: 0 })
    scryptNs.length = 0
    const res = await login(a, 'hostile', 'whatever1')
    expect(res.statusCode).toBe(500)
    expect(res.json().message).toBe('Internal Server Error')
    expect(scryptNs).toEqual([])
  })
})

describe('settings and stored hashes: bad ones are clear errors', () => {
  it.each([
    ['an unknown limit', { loginPerIp: { max: 1 } }, /rateLimits\.loginPerIp is not a known limit/],
    ['max 0', { loginPerUsername: { max: 0 } }, /rateLimits\.loginPerUsername\.max must be a positive integer, got 0/],
    ['a window as a string', { registerPerAddress: { timeWindow: '1 hour' } }, /timeWindow must be an integer number of ms, 1000 or more, got 1 hour/],
  ])('rateLimits with %s throws', (_name, overrides, message) => {
    expect(() => rateLimitSettings(overrides)).toThrow(message)
  })

  it('rateLimits replaces only what it names', () => {
    expect(rateLimitSettings({ loginPerUsername: { max: 5 } })).toEqual({ ...RATE_LIMITS, loginPerUsername: { max: 5, timeWindow: 900_000 } })
  })

  it.each([
    ['logN 21', { logN: 21, r: 8, p: 1 }, /scrypt\.logN must be an integer from 1 to 20, got 21/],
    ['r 0', { logN: 14, r: 0, p: 1 }, /scrypt\.r must be an integer from 1 to 16, got 0/],
    ['p 1.5', { logN: 14, r: 8, p: 1.5 }, /scrypt\.p must be an integer from 1 to 4, got 1.5/],
  ])('buildApp with scrypt %s throws before opening anything', async (_name, scrypt, message) => {
    await expect(buildApp({ mongoUrl: 'mongodb://127.0.0.1:1/', database: DB, scrypt })).rejects.toThrow(message)
  })

  it('a stored hash is read with its own parameters; one that cannot be read throws', () => {
    expect(parseStored({ passwordHash: '$scrypt$ln=15,r=8,p=2$AAAA$BBBB' })).toMatchObject({ params: { logN: 15, r: 8, p: 2 } })
    expect(parseStored({ passwordHash: 'BBBB', salt: 'AAAA' })).toMatchObject({ params: { logN: 14, r: 8, p: 1 } })
    expect(() => parseStored({ passwordHash: '$scrypt$ln=15,r=8$AAAA$BBBB' })).toThrow(/not a readable \$scrypt\$ string/)
    expect(() => parseStored({ passwordHash: 'BBBB' })).toThrow(/no password hash/)
    expect(() => parseStored({})).toThrow(/no password hash/)
  })

  it('older means any parameter lower than the current one', () => {
    const current = { logN: 17, r: 8, p: 1 }
    expect(isOlder({ logN: 14, r: 8, p: 1 }, current)).toBe(true)
    expect(isOlder({ logN: 17, r: 4, p: 1 }, current)).toBe(true)
    expect(isOlder({ logN: 17, r: 8, p: 1 }, current)).toBe(false)
    expect(isOlder({ logN: 18, r: 8, p: 1 }, current)).toBe(false)
  })
})
