/**
 * Errors thrown or used to reject by the buffer. Every rejection of a write carries:
 * - `code`: stable string code for our own errors, or the server's numeric code for
 *   a write the server refused (11000 stays 11000, so `err.code === 11000` keeps working);
 * - `outcome`: whether the write happened — `'not-sent'` (never reached the server),
 *   `'rejected'` (the server refused it), `'unknown'` (it may or may not have been applied);
 * - `attempts`: how many times it was sent.
 */
export type WriteOutcome = 'not-sent' | 'rejected' | 'unknown'

export const ErrorCodes = {
  CLOSED: 'WRITE_BUFFER_CLOSED',
  FULL: 'WRITE_BUFFER_FULL',
  ABORTED: 'WRITE_BUFFER_ABORTED',
  TIMEOUT: 'WRITE_BUFFER_TIMEOUT',
  BATCH_FAILED: 'WRITE_BUFFER_BATCH_FAILED',
  INVALID_WRITE: 'WRITE_BUFFER_INVALID_WRITE',
  INVALID_OPTION: 'WRITE_BUFFER_INVALID_OPTION',
  CONNECT_FAILED: 'WRITE_BUFFER_CONNECT_FAILED',
} as const

export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes]

/** An error of the buffer itself (closed, full, aborted, timed out, batch failed). */
export class WriteBufferError extends Error {
  readonly code: ErrorCode
  readonly outcome: WriteOutcome
  readonly attempts: number
  /** HTTP status Fastify's error handler answers with when a route does not catch this */
  readonly statusCode: number
  /** e.g. Retry-After on WRITE_BUFFER_FULL (Fastify's error handler sends `error.headers`) */
  readonly headers: Record<string, string> | undefined

  constructor (code: ErrorCode, message: string, outcome: WriteOutcome, attempts = 0, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause })
    this.name = 'WriteBufferError'
    this.code = code
    this.outcome = outcome
    this.attempts = attempts
    this.statusCode = 503
    this.headers = code === ErrorCodes.FULL ? { 'retry-after': '1' } : undefined
  }
}

/** Bad input: the write never joined a batch. A TypeError, so `instanceof TypeError` holds. */
export class InvalidWriteError extends TypeError {
  readonly code = ErrorCodes.INVALID_WRITE
  readonly outcome: WriteOutcome = 'not-sent'
  readonly attempts = 0

  constructor (message: string) {
    super(message)
    this.name = 'InvalidWriteError'
  }
}

/** A bad option given to a constructor or to `register`. */
export class InvalidOptionError extends TypeError {
  readonly code = ErrorCodes.INVALID_OPTION

  constructor (message: string) {
    super(message)
    this.name = 'InvalidOptionError'
  }
}

/** The plugin could not reach the server at start-up (names the hosts, never credentials). */
export class ConnectError extends Error {
  readonly code = ErrorCodes.CONNECT_FAILED

  constructor (message: string, cause: unknown) {
    super(message, { cause })
    this.name = 'ConnectError'
  }
}

/**
 * The server refused this one write inside an otherwise processed batch
 * (duplicate key, validation failure…). Keeps the server's code, message and errInfo.
 */
export class WriteRejectedError extends Error {
  readonly code: number
  readonly errInfo: unknown
  readonly outcome: WriteOutcome
  readonly attempts: number

  constructor (code: number, message: string, attempts: number, errInfo?: unknown, outcome: WriteOutcome = 'rejected') {
    super(message)
    this.name = 'WriteRejectedError'
    this.code = code
    this.outcome = outcome
    this.errInfo = errInfo
    this.attempts = attempts
  }
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
