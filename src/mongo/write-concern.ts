import type { WriteConcernSettings } from 'mongodb'
import { InvalidOptionError } from '../errors.js'

/** Whether `w` asks for no acknowledgement: the driver reads it with Number() (so false, '', '0.0' are 0 too). */
export function unacknowledged (w: unknown): boolean {
  return w !== undefined && w !== null && typeof w !== 'symbol' && Number(w) === 0
}

/** `w: 0` is refused: no write could then be confirmed, so every caller would be told "ok" blindly. */
export function checkWriteConcern (wc: WriteConcernSettings | undefined): WriteConcernSettings | undefined {
  if (wc === undefined) return undefined
  if (unacknowledged(wc.w)) {
    throw new InvalidOptionError('writeConcern { w: 0 } is not supported: unacknowledged writes cannot be confirmed to their callers, ' +
      'so every write would resolve without knowing whether it happened. Use w: 1 or more')
  }
  return wc
}
