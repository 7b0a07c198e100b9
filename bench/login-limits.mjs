// What the login suites leave out of the example app's login path (examples/fastify-app), and
// why: printed in their notes and kept in their results, so a reader of the numbers knows.
// The values come from the example itself, so the notes follow its settings.
import { SCRYPT } from '../examples/fastify-app/password.mjs'
import { RATE_LIMITS } from '../examples/fastify-app/rate-limits.mjs'

const minutes = ms => ms === 60_000 ? 'minute' : `${ms / 60_000} minutes`

/** `{ rateLimits, scrypt }` as the example sets them, for a suite's results. */
export const loginLimitsLeftOut = {
  rateLimits: { applied: false, example: RATE_LIMITS },
  scrypt: { applied: false, example: SCRYPT },
}

/** The notes: rate limits off, scrypt replaced, and why. */
export function loginLimitsNotes () {
  const { loginPerAddress: addr, loginPerUsername: user } = RATE_LIMITS
  return [
    `rate limits off: the example allows ${addr.max} logins per client address per ${minutes(addr.timeWindow)} and ${user.max} per username per ${minutes(user.timeWindow)} ` +
      '(@fastify/rate-limit); this load comes from one address (127.0.0.1) at thousands of logins a second, so with them on every request after the first ' +
      `${addr.max} would be a 429 and the run would time the limiter's refusals, not the login path. The limiter's own cost (one counter increment per limit ` +
      'per request, in memory or a Redis round trip) is not in these numbers',
    `scrypt off: the example hashes at N = 2^${SCRYPT.logN}, r = ${SCRYPT.r}, p = ${SCRYPT.p}, a few hashes per second per core (its README's table): ` +
      'verifying it per request would cap every variant at that rate and hide what the database path costs, which is what these suites compare',
  ]
}
