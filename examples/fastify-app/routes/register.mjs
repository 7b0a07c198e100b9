import { hashPassword } from '../password.mjs'
import { perAddress } from '../rate-limits.mjs'
import { credentials, idReply } from '../schemas.mjs'
import { httpError } from '../http-error.mjs'
import { canonicalizeUsername } from '../username.mjs'

const DUPLICATE_KEY = 11000

/**
 * POST /register {username, password} → 201 {id}; 409 when the username is taken, in any
 * case or Unicode form (the canonical form is stored, under a unique index); 429 (Retry-After)
 * past `limits.registerPerAddress`. The password is stored hashed with `scrypt`, which the
 * stored string records (password.mjs).
 */
export default async function registerRoute (app, { limits, scrypt }) {
  const users = app.writeBuffer.collection('users')

  app.post('/register', {
    config: { rateLimit: perAddress(limits.registerPerAddress) }, // per client address, before the body is parsed
    schema: { body: credentials, response: { 201: idReply } },
    preValidation: canonicalizeUsername, // "Alice", "alice", "ａｌｉｃｅ": one user
  }, async (request, reply) => {
    const { username, password } = request.body
    const passwordHash = await hashPassword(password, scrypt)
    try {
      const { insertedId } = await users.insertOne({ username, passwordHash, createdAt: new Date(), logins: 0 })
      return reply.code(201).send({ id: insertedId.toHexString() })
    } catch (err) {
      if (err.code === DUPLICATE_KEY) throw httpError(409, 'username already taken')
      throw err // buffer errors carry statusCode 503 (+ Retry-After when full)
    }
  })
}
