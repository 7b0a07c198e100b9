// Rate limits on /login, /register and /events, with @fastify/rate-limit (README: "Rate limits").
// Per client address on both routes, the plugin's own route hook (before the body is even
// parsed); per username on /login, after the body is checked and the name made canonical.
// The counters live in Redis when one is configured (the cache bus's), so every instance
// counts against the same limits; in this process's memory otherwise.
import rateLimit from '@fastify/rate-limit'
import { httpError } from './http-error.mjs'

const MINUTE = 60_000

/**
 * The example's limits: `max` requests per `timeWindow` ms. buildApp({ rateLimits }) replaces
 * any of them (tests and the bench do, and say why).
 * - loginPerAddress: credential stuffing from one address. 30 a minute still lets a shared
 *   office address (NAT) log in 30 people a minute, and bounds the scrypt work one address
 *   can ask for to one hash every 2 s (README: "Password cost").
 * - loginPerUsername: guessing one account's password from many addresses. Every attempt
 *   counts, right or wrong: the 21st in 15 minutes is a 429 (see perUsernameLimit for why
 *   successes count too). OWASP's authentication guidance asks for such a per-account limit;
 *   it also lets anyone lock an account out for 15 minutes, the usual price of one.
 * - registerPerAddress: account creation is rarer than login; 10 an hour per address.
 * - eventsPerAddress: tracking needs no account, so anyone may post: 6,000 a minute per address
 *   (100 a second, for a busy page or a NAT of many) bounds what one address can store at
 *   ~100 × EVENT_BODY_LIMIT a second, where no limit let it fill the database.
 */
export const RATE_LIMITS = Object.freeze({
  loginPerAddress: Object.freeze({ max: 30, timeWindow: MINUTE }),
  loginPerUsername: Object.freeze({ max: 20, timeWindow: 15 * MINUTE }),
  registerPerAddress: Object.freeze({ max: 10, timeWindow: 60 * MINUTE }),
  eventsPerAddress: Object.freeze({ max: 6000, timeWindow: MINUTE }),
})

/**
 * How many usernames (and, per route, addresses) the in-memory store remembers, least
 * recently seen dropped first. The plugin's default, 5,000, would let someone who sprays
 * 5,000 other names wipe the count of the one they are guessing.
 */
const MEMORY_ENTRIES = 100_000

/** `RATE_LIMITS` with `overrides` applied, each checked once. */
export function rateLimitSettings (overrides = {}) {
  const out = {}
  for (const key of Object.keys(overrides)) {
    if (!(key in RATE_LIMITS)) throw new TypeError(`rateLimits.${key} is not a known limit (${Object.keys(RATE_LIMITS).join(', ')})`)
  }
  for (const [key, defaults] of Object.entries(RATE_LIMITS)) {
    const { max, timeWindow } = { ...defaults, ...overrides[key] }
    if (!Number.isInteger(max) || max < 1) throw new TypeError(`rateLimits.${key}.max must be a positive integer, got ${String(max)}`)
    if (!Number.isInteger(timeWindow) || timeWindow < 1000) throw new TypeError(`rateLimits.${key}.timeWindow must be an integer number of ms, 1000 or more, got ${String(timeWindow)}`)
    out[key] = Object.freeze({ max, timeWindow })
  }
  return Object.freeze(out)
}

/**
 * Registers @fastify/rate-limit for the routes that opt in (`config.rateLimit`): nothing is
 * limited by default. `redis`: an ioredis client, or undefined for the in-memory store.
 * A Redis that cannot be reached fails the limited routes (a 500, logged) rather than lifting
 * their limits: `skipOnError: false`, the plugin's default, kept on purpose.
 */
export async function registerRateLimit (app, { redis, nameSpace }) {
  await app.register(rateLimit, {
    global: false,
    ...(redis === undefined ? { cache: MEMORY_ENTRIES } : { redis, nameSpace }),
    skipOnError: false,
  })
}

/**
 * The route option for a per-address limit (`config: { rateLimit: perAddress(limit) }`): the
 * plugin's own hook, keyed on `request.ip`, run first (`onRequest`), before the body is read.
 */
export function perAddress ({ max, timeWindow }) {
  return { max, timeWindow, cache: MEMORY_ENTRIES } // per route, the in-memory store's size is set here
}

/**
 * A preHandler for /login: at most `max` attempts per canonical username per `timeWindow`,
 * counted by the plugin's store (`app.createRateLimit`) and answered as the plugin answers:
 * 429 with Retry-After and the x-ratelimit-* headers. It runs after the body is checked, so
 * the key is the name as stored, and before the user is looked up or any scrypt runs.
 *
 * Every attempt is counted when it arrives, a successful one too. Counting only failures
 * means checking before the password is verified and counting after, and then a burst of
 * parallel guesses all pass the check before any of them is counted (the plugin's
 * `{ increment: false }` peek is not a reservation); counting on arrival is one atomic INCR.
 * A user who logs in 20 times in 15 minutes is rare; a guesser who does is not.
 */
export function perUsernameLimit (app, { max, timeWindow }) {
  const check = app.createRateLimit({
    max,
    timeWindow,
    cache: MEMORY_ENTRIES,
    keyGenerator: request => `login-username:${request.body.username}`,
  })
  return async function limitPerUsername (request, reply) {
    const limit = await check(request)
    if (!limit.isExceeded) return
    reply.headers({
      'x-ratelimit-limit': limit.max,
      'x-ratelimit-remaining': 0,
      'x-ratelimit-reset': limit.ttlInSeconds,
      'retry-after': limit.ttlInSeconds,
    })
    throw httpError(429, `Rate limit exceeded, retry in ${limit.ttlInSeconds} s`)
  }
}
