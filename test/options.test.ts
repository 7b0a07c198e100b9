import { describe, expect, it } from 'vitest'
import type { Db } from 'mongodb'
import { InvalidOptionError, WriteBuffer } from '../src/index.js'
import { thrownBy } from './support/thrown.js'

const fakeDb = { collection: () => ({}) } as unknown as Db

describe('options are validated once, with the bad value in the message', () => {
  const cases: Array<[object, RegExp]> = [
    [{ maxBatchSize: 0 }, /maxBatchSize must be an integer from 1 to 99999, got 0/],
    [{ maxBatchSize: 100_000 }, /maxBatchSize must be an integer from 1 to 99999, got 100000/],
    [{ writeConcern: { w: 0 } }, /w: 0 } is not supported: unacknowledged writes cannot be confirmed/],
    [{ maxBatchSize: 1.5 }, /got 1.5/],
    [{ maxBatchSize: 200_000 }, /got 200000/],
    [{ maxBatchBytes: '1mb' }, /maxBatchBytes .* got "1mb"/],
    [{ lingerMs: -1 }, /lingerMs .* got -1/],
    [{ lingerMs: 70_000 }, /lingerMs must be a number from 0 to 60000, got 70000/],
    [{ flushIntervalMs: -1 }, /flushIntervalMs .* got -1/],
    [{ lingerMs: 5, flushIntervalMs: 5 }, /give only lingerMs/],
    [{ onFull: 'drop' }, /onFull must be 'wait' or 'reject', got "drop"/],
    [{ maxInFlight: 0 }, /maxInFlight/],
    [{ inFlightLimit: 'auto' }, /inFlightLimit must be 'adaptive' or 'fixed', got "auto"/],
    [{ maxPending: null }, /maxPending .* got null/],
    [{ coalesce: 'yes' }, /coalesce must be a boolean/],
    [{ logger: { debug: 1 } }, /logger.debug must be a function/],
    [{ logger: { debug () {}, warn () {}, error () {}, isLevelEnabled: true } }, /logger.isLevelEnabled must be a function/],
    [{ retry: { maxAttempts: 0 } }, /retry.maxAttempts/],
    [{ cache: { ttlMs: 0 } }, /cache.ttlMs/],
    [{ maxBatchsize: 10 }, /unknown option maxBatchsize/],
  ]
  for (const [options, message] of cases) {
    it(JSON.stringify(options), () => {
      const err = thrownBy(() => new WriteBuffer(fakeDb, options as never))
      expect(err).toBeInstanceOf(InvalidOptionError)
      expect(err).toBeInstanceOf(TypeError)
      expect((err as InvalidOptionError).code).toBe('WRITE_BUFFER_INVALID_OPTION')
      expect((err as Error).message).toMatch(message)
    })
  }

  it('needs a Db', () => {
    expect(() => new WriteBuffer(undefined as never)).toThrow(TypeError)
  })

  it('flushIntervalMs still works as the deprecated name of lingerMs, with one warning per process', () => {
    const warnings: Array<string | Error> = []
    const emit = process.emitWarning
    process.emitWarning = ((w: string | Error) => { warnings.push(w) }) as typeof process.emitWarning
    try {
      const wb = new WriteBuffer(fakeDb, { flushIntervalMs: 7 } as never)
      expect(wb.closed).toBe(false)
      expect(warnings).toHaveLength(1)
      expect(String(warnings[0])).toMatch(/flushIntervalMs option is deprecated, use lingerMs/)
      expect(thrownBy(() => new WriteBuffer(fakeDb, { lingerMs: 7 }))).toBeUndefined()
      expect(warnings).toHaveLength(1)
      // a second buffer with the old name: told once already
      expect(new WriteBuffer(fakeDb, { flushIntervalMs: 7 } as never).closed).toBe(false)
      expect(warnings).toHaveLength(1)
    } finally {
      process.emitWarning = emit
    }
  })
})
