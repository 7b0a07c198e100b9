import type { WriteConcernSettings } from 'mongodb'
import { InvalidOptionError, describe } from '../errors.js'

/** Whether `w` asks for no acknowledgement: the driver reads it with Number() (so false, '', '0.0' are 0 too). */
export function unacknowledged (w: unknown): boolean {
  return w !== undefined && w !== null && typeof w !== 'symbol' && Number(w) === 0
}

const KEYS = new Set(['w', 'j', 'journal', 'wtimeoutMS', 'wtimeout', 'fsync'])

/**
 * Checked once, at construction, so that no batch fails for it later: `w` a whole number of
 * at least 1 or a mode / tag-set name ('majority'); `w: 0` is refused (no write could then be
 * confirmed, so every caller would be told "ok" blindly); `j`/`journal` booleans; `fsync` a
 * boolean or 1; `wtimeoutMS`/`wtimeout` milliseconds; nothing else.
 */
export function checkWriteConcern (wc: WriteConcernSettings | undefined): WriteConcernSettings | undefined {
  if (wc === undefined) return undefined
  const { w, j, journal, fsync, wtimeoutMS, wtimeout } = wc as Record<string, unknown>
  if (unacknowledged(w)) {
    throw new InvalidOptionError('writeConcern { w: 0 } is not supported: unacknowledged writes cannot be confirmed to their callers, ' +
      'so every write would resolve without knowing whether it happened. Use w: 1 or more')
  }
  for (const key of Object.keys(wc)) if (!KEYS.has(key)) throw new InvalidOptionError(`writeConcern has an unknown key ${describe(key)}`)
  const mode = typeof w === 'string' && w !== '' && Number.isNaN(Number(w))
  if (w !== undefined && !(typeof w === 'number' && Number.isInteger(w) && w >= 1) && !mode) {
    throw new InvalidOptionError(`writeConcern.w must be a whole number from 1 or a mode name such as 'majority', got ${describe(w)}`)
  }
  for (const [name, v] of [['j', j], ['journal', journal]] as const) {
    if (v !== undefined && typeof v !== 'boolean') throw new InvalidOptionError(`writeConcern.${name} must be a boolean, got ${describe(v)}`)
  }
  if (fsync !== undefined && typeof fsync !== 'boolean' && fsync !== 1) throw new InvalidOptionError(`writeConcern.fsync must be a boolean, got ${describe(fsync)}`)
  for (const [name, v] of [['wtimeoutMS', wtimeoutMS], ['wtimeout', wtimeout]] as const) {
    if (v !== undefined && (typeof v !== 'number' || !Number.isFinite(v) || v < 0)) {
      throw new InvalidOptionError(`writeConcern.${name} must be a number of milliseconds, got ${describe(v)}`)
    }
  }
  return wc
}
