import { hashPassword, verifyPassword } from '../password.mjs'
import { perAddress, perUsernameLimit } from '../rate-limits.mjs'
import { credentials } from '../schemas.mjs'
import { httpError } from '../http-error.mjs'
import { canonicalizeUsername } from '../username.mjs'

/**
 * How long a login's bookkeeping may wait for the same user's next logins to merge with it
 * (README: "Why the login bookkeeping lingers 2 s"). Each active user then costs at most one
 * update statement per 2 s however often they log in; the read cache shows the new counter at
 * once; the database lags by at most 2 s plus a round trip; a crash loses at most that much.
 */
const LOGIN_LINGER_MS = 2000

/**
 * POST /login {username, password} → 200 {ok, logins}; 401 for an unknown user or a wrong
 * password alike; 429 (Retry-After) past `limits.loginPerAddress` or `limits.loginPerUsername`.
 * `scrypt`: the parameters new hashes get; a login whose stored hash is older is rehashed.
 */
export default async function loginRoute (app, { limits, scrypt }) {
  const users = app.writeBuffer.collection('users')
  const audit = app.writeBuffer.collection('audit')
  // Unknown users are checked against this, hashed with the current parameters, so both
  // failures cost one scrypt of the same cost.
  const nobody = { passwordHash: await hashPassword('not-a-real-password', scrypt) }

  app.post('/login', {
    // per client address, before the body is parsed (the plugin's onRequest hook)
    config: { rateLimit: perAddress(limits.loginPerAddress) },
    schema: {
      body: credentials,
      response: {
        200: {
          type: 'object',
          required: ['ok', 'logins'],
          properties: { ok: { type: 'boolean' }, logins: { type: 'integer' } },
        },
      },
    },
    preValidation: canonicalizeUsername, // looked up in the form register stored
    // per username (canonical, schema-checked), before the lookup and the scrypt
    preHandler: perUsernameLimit(app, limits.loginPerUsername),
  }, async request => {
    const { username, password } = request.body
    // Read cache: repeated logins are served from memory. The whole document is cached
    // (no projection) so the buffer can patch the $set/$inc below into the cached copy;
    // a projected entry would be dropped on every write instead.
    const user = await users.findOne({ username })
    const { ok, rehash } = await verifyPassword(password, user ?? nobody, scrypt)
    if (user === null || !ok) throw httpError(401, 'invalid username or password')
    if (rehash) await rehashPassword(request, users, user, password, scrypt)

    // The response does not depend on these writes: nobody awaits them (detached), their
    // failures go to onWriteError (see app.mjs), and SIGTERM's close() still sends them.
    // $max (not $set): merged logins keep the latest time whatever order they arrive in.
    // A detached write throws at once only when the buffer is full or closing: the login
    // itself succeeded, so that is logged, not answered with a 503.
    const now = new Date()
    try {
      users.updateOne({ _id: user._id }, { $max: { lastLoginAt: now }, $inc: { logins: 1 } }, { detached: true, lingerMs: LOGIN_LINGER_MS })
    } catch (err) {
      request.log.warn({ code: err.code }, 'login bookkeeping not queued')
    }
    try {
      // An insert has nothing of its own to merge with: it is batched with its neighbours as it is.
      audit.insertOne({ kind: 'login', userId: user._id, at: now, ip: request.ip }, { detached: true })
    } catch (err) {
      request.log.warn({ code: err.code }, 'login audit not queued')
    }
    return { ok: true, logins: (user.logins ?? 0) + 1 }
  })
}

/**
 * The stored hash's parameters are older than `scrypt`: hash the password again, now that we
 * have it, and store that (the salt field of the oldest format goes). Only if the stored hash
 * is still the one just checked: a password changed meanwhile is not overwritten. Detached,
 * as the bookkeeping: a rehash that fails is logged, and tried again at the next login.
 */
async function rehashPassword (request, users, user, password, scrypt) {
  const passwordHash = await hashPassword(password, scrypt)
  try {
    users.updateOne(
      { _id: user._id, passwordHash: user.passwordHash },
      { $set: { passwordHash }, $unset: { salt: '' } },
      { detached: true }
    )
  } catch (err) {
    request.log.warn({ code: err.code }, 'password rehash not queued')
  }
}
