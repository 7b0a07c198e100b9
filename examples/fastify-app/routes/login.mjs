import { hashPassword, verifyPassword } from '../password.mjs'
import { credentials } from '../schemas.mjs'
import { httpError } from '../http-error.mjs'
import { canonicalizeUsername } from '../username.mjs'

// Unknown users are checked against this, so both failures cost one scrypt.
const nobody = await hashPassword('not-a-real-password')

/** POST /login {username, password} → 200 {ok, logins}; 401 for an unknown user or a wrong password alike. */
export default async function loginRoute (app) {
  const users = app.writeBuffer.collection('users')

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

    await users.updateOne({ _id: user._id }, { $set: { lastLoginAt: new Date() }, $inc: { logins: 1 } })
    return { ok: true, logins: (user.logins ?? 0) + 1 }
  })
}
