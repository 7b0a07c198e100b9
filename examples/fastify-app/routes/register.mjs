import { hashPassword } from '../password.mjs'
import { credentials, idReply } from '../schemas.mjs'
import { httpError } from '../http-error.mjs'
import { canonicalizeUsername } from '../username.mjs'

const DUPLICATE_KEY = 11000

/**
 * POST /register {username, password} → 201 {id}; 409 when the username is taken, in any
 * case or Unicode form (the canonical form is stored, under a unique index).
 */
export default async function registerRoute (app) {
  const users = app.writeBuffer.collection('users')

  app.post('/register', {
    schema: { body: credentials, response: { 201: idReply } },
    preValidation: canonicalizeUsername, // "Alice", "alice", "ａｌｉｃｅ": one user
  }, async (request, reply) => {
    const { username, password } = request.body
    const { salt, passwordHash } = await hashPassword(password)
    try {
      const { insertedId } = await users.insertOne({ username, passwordHash, salt, createdAt: new Date(), logins: 0 })
      return reply.code(201).send({ id: insertedId.toHexString() })
    } catch (err) {
      if (err.code === DUPLICATE_KEY) throw httpError(409, 'username already taken')
      throw err // buffer errors carry statusCode 503 (+ Retry-After when full)
    }
  })
}
