import { hashPassword, verifyPassword } from '../password.mjs'
import { credentials } from '../schemas.mjs'
import { httpError } from '../http-error.mjs'
import { canonicalizeUsername } from '../username.mjs'

// Unknown users are checked against this, so both failures cost one scrypt.
const nobody = await hashPassword('not-a-real-password')

/**
 * How long a login's bookkeeping may wait for the same user's next logins to merge with it
 * (README: "Why the login bookkeeping lingers 2 s"). Each active user then costs at most one
 * update statement per 2 s however often they log in; the read cache shows the new counter at
 * once; the database lags by at most 2 s plus a round trip; a crash loses at most that much.
 */
const LOGIN_LINGER_MS = 2000

/** POST /login {username, password} → 200 {ok, logins}; 401 for an unknown user or a wrong password alike. */
export default async function loginRoute (app) {
  const users = app.writeBuffer.collection('users')
  const audit = app.writeBuffer.collection('audit')

  app.post('/login', {
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
  }, async request => {
    const { username, password } = request.body
    // Read cache: repeated logins are served from memory. The whole document is cached
    // (no projection) so the buffer can patch the $set/$inc below into the cached copy;
    // a projected entry would be dropped on every write instead.
    const user = await users.findOne({ username })
    const ok = await verifyPassword(password, user ?? nobody)
    if (user === null || !ok) throw httpError(401, 'invalid username or password')

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
