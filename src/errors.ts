/**
 * Errors thrown or used to reject by the buffer: one family. `e instanceof WriteBufferError`
 * holds for every error this package creates —
 *
 *   WriteBufferError            closed, full, shed, aborted, timed out, batch failed
 *   ├─ WriteRejectedError       the server refused this write (code = the server's: 11000…)
 *   └─ ConnectError             the plugin could not reach the server at start-up
 *   InvalidWriteError           bad input to a write   } TypeErrors (`instanceof TypeError` holds),
 *   InvalidOptionError          bad option             } and `instanceof WriteBufferError` too
 *
 * — the last two through WriteBufferError's `Symbol.hasInstance`, which reads a brand every
 * member carries (also across the CommonJS and ESM copies of the package). Each carries:
 * - `code`: stable string code for our own errors, or the server's numeric code for
 *   a write the server refused (11000 stays 11000, so `err.code === 11000` keeps working);
 * - `outcome`: whether the write happened — `'not-sent'` (never reached the server),
 *   `'rejected'` (the server refused it), `'unknown'` (it may or may not have been applied);
 * - `attempts`: how many times it was sent;
 * - `statusCode` (and `headers`): what Fastify's error handler answers when a route does not
 *   catch it; `cause`: the server's or driver's error, when there is one.
 */
export type WriteOutcome = 'not-sent' | 'rejected' | 'unknown'

export const ErrorCodes = {
  CLOSED: 'WRITE_BUFFER_CLOSED',
  FULL: 'WRITE_BUFFER_FULL',
  /** refused at the door: at the rate the server serves the buffer now, the write would pass its deadline still queued */
  SHED: 'WRITE_BUFFER_SHED',
  ABORTED: 'WRITE_BUFFER_ABORTED',
  TIMEOUT: 'WRITE_BUFFER_TIMEOUT',
  BATCH_FAILED: 'WRITE_BUFFER_BATCH_FAILED',
  INVALID_WRITE: 'WRITE_BUFFER_INVALID_WRITE',
  INVALID_OPTION: 'WRITE_BUFFER_INVALID_OPTION',
  CONNECT_FAILED: 'WRITE_BUFFER_CONNECT_FAILED',
} as const

export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes]

/** Marks every member of the family; `Symbol.for` so another copy of the package sees it too. */
const FAMILY = Symbol.for('fastify-write-buffer.WriteBufferError')
const ordinaryInstanceOf = Function.prototype[Symbol.hasInstance]

/**
 * The family's base: every error of this package is `instanceof WriteBufferError`. Its own
 * instances are the buffer's errors (closed, full, shed, aborted, timed out, batch failed).
 */
export class WriteBufferError extends Error {
  /** our string code, or the server's number when the server refused the write (WriteRejectedError) */
  readonly code: ErrorCode | number
  readonly outcome: WriteOutcome
  readonly attempts: number
  /** HTTP status Fastify's error handler answers with when a route does not catch this */
  readonly statusCode: number
  /** e.g. Retry-After on WRITE_BUFFER_FULL and WRITE_BUFFER_SHED (Fastify's error handler sends `error.headers`) */
  readonly headers: Record<string, string> | undefined

  constructor (code: ErrorCode | number, message: string, outcome: WriteOutcome, attempts = 0, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause })
    this.name = 'WriteBufferError'
    this.code = code
    this.outcome = outcome
    this.attempts = attempts
    // a refusal by the server or bad input is the app's to handle (500 until it maps it, e.g.
    // 11000 → 409); the buffer's own trouble is a temporary unavailability
    this.statusCode = typeof code === 'number' || code === ErrorCodes.INVALID_WRITE || code === ErrorCodes.INVALID_OPTION ? 500 : 503
    this.headers = code === ErrorCodes.FULL || code === ErrorCodes.SHED ? { 'retry-after': '1' } : undefined
  }

  /**
   * `e instanceof WriteBufferError` is true for every member of the family, the two TypeErrors
   * included; `instanceof` a subclass is the ordinary prototype check. Typed so that
   * TypeScript narrows to the class on the right (WriteRejectedError narrows to itself).
   */
  static override [Symbol.hasInstance]<T> (this: abstract new (...args: never[]) => T, value: unknown): value is T {
    if ((this as unknown) !== WriteBufferError) return ordinaryInstanceOf.call(this, value)
    return typeof value === 'object' && value !== null && (value as { [FAMILY]?: unknown })[FAMILY] === true
  }
}

/**
 * The server refused this one write inside an otherwise processed batch
 * (duplicate key, validation failure…). Keeps the server's code, message and errInfo;
 * `cause` is the server's write error.
 */
export class WriteRejectedError extends WriteBufferError {
  /** the server's code: 11000 for a duplicate key… */
  declare readonly code: number
  readonly errInfo: unknown

  constructor (code: number, message: string, attempts: number, errInfo?: unknown, outcome: WriteOutcome = 'rejected', cause?: unknown) {
    super(code, message, outcome, attempts, cause)
    this.name = 'WriteRejectedError'
    this.errInfo = errInfo
  }
}

/** The plugin could not reach the server at start-up (names the hosts, never credentials). Nothing was written. */
export class ConnectError extends WriteBufferError {
  declare readonly code: typeof ErrorCodes.CONNECT_FAILED

  constructor (message: string, cause: unknown) {
    super(ErrorCodes.CONNECT_FAILED, message, 'not-sent', 0, cause)
    this.name = 'ConnectError'
  }
}

/**
 * Bad input: the write never joined a batch. A TypeError, so `instanceof TypeError` holds;
 * `instanceof WriteBufferError` holds too (the family's brand), with the same fields.
 */
export class InvalidWriteError extends TypeError implements WriteBufferError {
  readonly code = ErrorCodes.INVALID_WRITE
  readonly outcome: WriteOutcome = 'not-sent'
  readonly attempts = 0
  readonly statusCode = 500
  readonly headers = undefined

  constructor (message: string) {
    super(message)
    this.name = 'InvalidWriteError'
  }
}

/** A bad option given to a constructor or to `register`. A TypeError, and a member of the family as InvalidWriteError is. */
export class InvalidOptionError extends TypeError implements WriteBufferError {
  readonly code = ErrorCodes.INVALID_OPTION
  readonly outcome: WriteOutcome = 'not-sent'
  readonly attempts = 0
  readonly statusCode = 500
  readonly headers = undefined

  constructor (message: string, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause })
    this.name = 'InvalidOptionError'
  }
}

for (const member of [WriteBufferError, InvalidWriteError, InvalidOptionError]) {
  Object.defineProperty(member.prototype, FAMILY, { value: true })
}

/** Compact, safe rendering of a user value for error messages (never huge, never throws). */
export function describe (value: unknown): string {
  try {
    return describeValue(value)
  } catch {
    return 'an unreadable value' // a Proxy whose traps throw, a getter that throws
  }
}

function describeValue (value: unknown): string {
  if (value === null) return 'null'
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? value.slice(0, 57) + '...' : value)
  if (typeof value === 'bigint') return `${value.toString()}n`
  if (typeof value === 'symbol') return value.toString()
  if (typeof value === 'function') return 'a function'
  if (typeof value === 'number' || typeof value === 'boolean' || value === undefined) return String(value)
  if (Array.isArray(value)) return `an array of length ${value.length}`
  const ctor = (value as { constructor?: unknown }).constructor
  const name = typeof ctor === 'function' && ctor.name !== '' ? ctor.name : 'Object'
  let keys: string[]
  try {
    keys = Object.keys(value)
  } catch {
    return `a ${name}`
  }
  const shown = keys.slice(0, 5).join(', ')
  return `${name} {${shown}${keys.length > 5 ? ', ...' : ''}}`
}
