import { describe, expect, it } from 'vitest'
import { Label, readFailure, ServerCode } from '../../src/mongo/driver-errors.js'

/** An error named as the driver names its own (the buffer reads names, never instanceof). */
function named (name: string, fields: object = {}, message = name): Error {
  const err = Object.assign(new Error(message), fields)
  Object.defineProperty(err, 'name', { value: name })
  return err
}
const labelled = (...labels: string[]) => ({ hasErrorLabel: (l: string) => labels.includes(l) })

describe('readFailure: what the driver threw, read once', () => {
  it('a command refused with ok: 0, shaped by the driver as a write error at index 0, is a refusal; users get the command\'s error, its cause the thrown one', () => {
    const thrown = named('MongoBulkWriteError', { writeErrors: [{ index: 0, code: 13, errmsg: 'not authorized' }], result: { ok: 0 }, ...labelled(Label.RetryableWriteError) })
    const f = readFailure(thrown)
    expect(f).toMatchObject({ kind: 'refusal', name: 'MongoServerError', code: 13, message: 'not authorized', partial: undefined })
    expect(f.hasLabel(Label.RetryableWriteError)).toBe(true)
    expect(f.error).toMatchObject({ name: 'MongoServerError', code: 13, message: 'not authorized', cause: thrown })
  })

  it('a real write error at index 0 (result ok 1) is refused writes, the thrown error itself', () => {
    const thrown = named('MongoBulkWriteError', { writeErrors: [{ index: 0, code: 11000 }], result: { ok: 1 } })
    expect(readFailure(thrown)).toMatchObject({ kind: 'write-errors', partial: thrown, error: thrown })
  })

  it('a network error wrapped in a MongoBulkWriteError is read unwrapped; a socket\'s own error is a network error', () => {
    const inner = named('MongoNetworkError')
    const wrapped = readFailure(named('MongoBulkWriteError', { writeErrors: [], errorResponse: inner }))
    expect(wrapped).toMatchObject({ kind: 'other', name: 'MongoNetworkError', closedConnection: true })
    expect(wrapped.classify(false).error).toBe(inner)
    expect(readFailure(Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }))).toMatchObject({ name: 'MongoNetworkError', closedConnection: true, code: undefined })
  })

  it('too many writes: InvalidLength names the bound; overload by code or label', () => {
    const tooMany = readFailure(named('MongoServerError', { code: ServerCode.INVALID_LENGTH }, 'Write batch sizes must be between 1 and 25000. Got 30000 operations.'))
    expect(tooMany).toMatchObject({ kind: 'refusal', writeBatchBound: 25000, overload: false })
    expect(readFailure(named('MongoServerError', { code: ServerCode.OVERLOADED })).overload).toBe(true)
    expect(readFailure(named('MongoServerError', { code: 2, ...labelled(Label.SystemOverloadedError) })).overload).toBe(true)
  })

  it('whatever else is thrown (nothing, a string) reads as other, unknown', () => {
    expect(readFailure(undefined)).toMatchObject({ kind: 'other', name: '', code: undefined })
    expect(readFailure('boom').classify(false)).toMatchObject({ outcome: 'unknown', transient: false })
  })
})
