// Password hashing with scrypt: a random 16-byte salt per password, constant-time comparison.
import { randomBytes, scrypt as scryptCallback, timingSafeEqual } from 'node:crypto'
import { promisify } from 'node:util'

const scrypt = promisify(scryptCallback)
const KEY_LENGTH = 64

/** Returns what to store: `{ salt, passwordHash }`, both base64. */
export async function hashPassword (password) {
  const salt = randomBytes(16)
  const hash = await scrypt(password, salt, KEY_LENGTH)
  return { salt: salt.toString('base64'), passwordHash: hash.toString('base64') }
}

/** Whether `password` matches a stored `{ salt, passwordHash }`. */
export async function verifyPassword (password, { salt, passwordHash }) {
  const expected = Buffer.from(passwordHash, 'base64')
  const actual = await scrypt(password, Buffer.from(salt, 'base64'), expected.length)
  return actual.length === expected.length && timingSafeEqual(actual, expected)
}
