// Password hashing with scrypt: named cost parameters (README: "Password cost"), a random
// 16-byte salt per password, constant-time comparison. What is stored records its parameters
// (a PHC string: `$scrypt$ln=17,r=8,p=1$<salt>$<hash>`, the format passlib and others use), so
// the cost can be raised later: a login whose stored parameters are older than the app's is
// answered, then its password is hashed again with the new ones (routes/login.mjs).
import { randomBytes, scrypt as scryptCallback, timingSafeEqual } from 'node:crypto'

/**
 * The example's scrypt cost: OWASP's Password Storage Cheat Sheet's setting for scrypt,
 * N = 2^17 (`logN: 17`), r = 8, p = 1. One hash then needs 128 * N * r = 128 MiB of memory and,
 * on the machine the README measured, about half a second of one core (2 logins per second per
 * core): that is the trade with login throughput (README table, `scrypt-cost.mjs`).
 */
export const SCRYPT = Object.freeze({ logN: 17, r: 8, p: 1 })

/**
 * What hashes stored before parameters were recorded used: Node's scrypt defaults. A stored
 * `{ salt, passwordHash }` pair without a `$scrypt$` prefix is read with these.
 */
export const LEGACY_SCRYPT = Object.freeze({ logN: 14, r: 8, p: 1 })

const KEY_LENGTH = 64
const SALT_LENGTH = 16
/**
 * The most a stored hash may ask for: a corrupted or hostile record must not make one login
 * allocate gigabytes (logN 20 with r 8 is already 1 GiB).
 */
const CEILING = Object.freeze({ logN: 20, r: 16, p: 4 })

/** Bytes of memory one hash needs: OpenSSL's own figure, 128 * r * (N + p + 2), ~128 * N * r. */
export function memoryPerHash ({ logN, r, p }) {
  return 128 * r * (2 ** logN + p + 2)
}

/** Checks settings once (an options object, not per hash); returns them frozen. */
export function scryptSettings (settings = SCRYPT) {
  const { logN, r, p } = settings
  for (const [name, value] of [['logN', logN], ['r', r], ['p', p]]) {
    if (!Number.isInteger(value) || value < 1 || value > CEILING[name]) {
      throw new TypeError(`scrypt.${name} must be an integer from 1 to ${CEILING[name]}, got ${String(value)}`)
    }
  }
  return Object.freeze({ logN, r, p })
}

function scrypt (password, salt, length, { logN, r, p }) {
  return new Promise((resolve, reject) => {
    // Node refuses more than 32 MiB by default: N = 2^15 with r = 8 already needs a bit more
    scryptCallback(password, salt, length, { N: 2 ** logN, r, p, maxmem: memoryPerHash({ logN, r, p }) }, (err, key) => {
      if (err) reject(err)
      else resolve(key)
    })
  })
}

/** The PHC string to store for `password`, hashed with `settings` (already checked). */
export async function hashPassword (password, settings = SCRYPT) {
  const salt = randomBytes(SALT_LENGTH)
  const hash = await scrypt(password, salt, KEY_LENGTH, settings)
  return `$scrypt$ln=${settings.logN},r=${settings.r},p=${settings.p}$${salt.toString('base64')}$${hash.toString('base64')}`
}

const PHC = /^\$scrypt\$ln=(\d{1,2}),r=(\d{1,2}),p=(\d)\$([A-Za-z0-9+/]+={0,2})\$([A-Za-z0-9+/]+={0,2})$/

/**
 * The parameters, salt and hash of a stored user (`{ passwordHash }` as a PHC string, or the
 * older `{ salt, passwordHash }` pair, read with LEGACY_SCRYPT). Throws on anything else: a
 * record that cannot be read is a bug to see (a 500, logged), not a failed login.
 */
export function parseStored ({ passwordHash, salt }) {
  if (typeof passwordHash === 'string' && passwordHash.startsWith('$scrypt$')) {
    const m = PHC.exec(passwordHash)
    if (m === null) throw new Error('stored password hash is not a readable $scrypt$ string')
    const params = scryptSettings({ logN: Number(m[1]), r: Number(m[2]), p: Number(m[3]) })
    return { params, salt: Buffer.from(m[4], 'base64'), hash: Buffer.from(m[5], 'base64') }
  }
  if (typeof passwordHash === 'string' && typeof salt === 'string') {
    return { params: LEGACY_SCRYPT, salt: Buffer.from(salt, 'base64'), hash: Buffer.from(passwordHash, 'base64') }
  }
  throw new Error('stored user has no password hash')
}

/** Whether a hash stored with `stored` parameters costs less than `current`: rehash it on login. */
export function isOlder (stored, current) {
  return stored.logN < current.logN || stored.r < current.r || stored.p < current.p
}

/**
 * Checks `password` against a stored user: one scrypt, with the parameters it was stored with.
 * `{ ok, rehash }`: `rehash` is true when the password matched and its parameters are older
 * than `settings`.
 */
export async function verifyPassword (password, stored, settings = SCRYPT) {
  const { params, salt, hash } = parseStored(stored)
  const actual = await scrypt(password, salt, hash.length, params)
  const ok = actual.length === hash.length && timingSafeEqual(actual, hash)
  return { ok, rehash: ok && isOlder(params, settings) }
}
