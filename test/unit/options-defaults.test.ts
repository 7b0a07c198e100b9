import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { DEFAULTS, WRITE_BUFFER_OPTION_NAMES, resolveOptions } from '../../src/options.js'
// @ts-expect-error plain ESM script (npm run check:readme), no declarations: typed below
import * as readmeCheck from '../../scripts/check-readme.mjs'

interface Built { DEFAULTS: object, WRITE_BUFFER_OPTION_NAMES: readonly string[] }
const { checkOptionDefaults, readDefault } = readmeCheck as {
  checkOptionDefaults: (markdown: string, built: Built) => { failures: string[], checked: number }
  readDefault: (text: string) => unknown
}

const README = readFileSync(new URL('../../README.md', import.meta.url), 'utf8')
const built: Built = { DEFAULTS, WRITE_BUFFER_OPTION_NAMES }

describe('DEFAULTS: every default declared once', () => {
  it('is frozen, groups too', () => {
    expect(Object.isFrozen(DEFAULTS)).toBe(true)
    expect(Object.isFrozen(DEFAULTS.retry)).toBe(true)
    expect(Object.isFrozen(DEFAULTS.cache)).toBe(true)
    expect(Object.isFrozen(DEFAULTS.cache.bus)).toBe(true)
  })

  it('is what resolveOptions gives for options left out', () => {
    const { retry, cache: _cache, onFull, inFlightLimit, ...top } = DEFAULTS
    const o = resolveOptions({})
    expect(o).toMatchObject({
      ...top, ...retry, onFullReject: (onFull as 'wait' | 'reject') === 'reject', adaptiveInFlight: (inFlightLimit as 'adaptive' | 'fixed') === 'adaptive', cache: undefined,
    })
    const bus = { redis: 'redis://127.0.0.1:1' }
    expect(resolveOptions({ cache: { bus } }).cache).toEqual({
      ttlMs: DEFAULTS.cache.ttlMs,
      negativeTtlMs: Math.min(DEFAULTS.cache.ttlMs, DEFAULTS.cache.negativeTtlMs),
      maxEntries: DEFAULTS.cache.maxEntries,
      maxBytes: DEFAULTS.cache.maxBytes,
      bus: { ...bus, ...DEFAULTS.cache.bus },
    })
    // negativeTtlMs' default is capped by the ttlMs given
    expect(resolveOptions({ cache: { ttlMs: 10 } }).cache?.negativeTtlMs).toBe(10)
  })

  it('every option name is accepted, and nothing else', () => {
    for (const name of WRITE_BUFFER_OPTION_NAMES) expect(() => resolveOptions({ [name]: undefined })).not.toThrow()
    expect(() => resolveOptions({ maxInflight: 4 })).toThrow(/unknown option maxInflight/)
    expect(() => resolveOptions({ retry: { maxAttempt: 4 } })).toThrow(/unknown option retry.maxAttempt/)
    expect(() => resolveOptions({ cache: { ttl: 4 } })).toThrow(/unknown option cache.ttl/)
    expect(() => resolveOptions({ cache: { bus: { redis: 'redis://h:1', chanel: 'x' } } })).toThrow(/unknown option cache.bus.chanel/)
  })
})

describe("the README's options table against DEFAULTS (scripts/check-readme.mjs)", () => {
  it('agrees today: every default, the groups\' too', () => {
    const { failures, checked } = checkOptionDefaults(README, built)
    expect(failures).toEqual([])
    expect(checked).toBeGreaterThanOrEqual(20) // 11 options, retry's 3, cache's 4, cache.bus's 2
  })

  it('reads the forms the table writes', () => {
    expect(['1000', '100,000', '8 MiB', '0 (adaptive)', "`'wait'`", 'true', 'min(ttlMs, 1000)', "'fastify-write-buffer'"].map(readDefault))
      .toEqual([1000, 100_000, 8 * 1024 * 1024, 0, 'wait', true, 1000, 'fastify-write-buffer'])
    expect(readDefault('off')).toBeUndefined()
  })

  it('fails on a default changed in code and not in the README', () => {
    const changed = { ...DEFAULTS, maxPending: 50_000, retry: { ...DEFAULTS.retry, baseDelayMs: 25 } }
    expect(checkOptionDefaults(README, { ...built, DEFAULTS: changed }).failures).toEqual([
      expect.stringMatching(/^maxPending: DEFAULTS has 50000, README line \d+ says 100,000$/),
      expect.stringMatching(/^retry\.baseDelayMs: DEFAULTS has 25, README line \d+ says 50$/),
    ])
  })

  it('fails on a default changed in the README table, a group\'s, or a "(default …)" in the prose', () => {
    const edited = README
      .replace('| `maxInFlight` | 16 |', '| `maxInFlight` | 8 |')
      .replace('maxEntries: 10000', 'maxEntries: 20000')
      .replace("channel: 'fastify-write-buffer'", "channel: 'fwb'")
      .replace('`maxTimeMS` (default 5,000)', '`maxTimeMS` (default 6,000)')
    expect(checkOptionDefaults(edited, built).failures).toEqual([
      expect.stringMatching(/^maxInFlight: DEFAULTS has 16, README line \d+ says 8$/),
      expect.stringMatching(/^cache\.maxEntries: DEFAULTS has 10000, README line \d+ says 20000$/),
      expect.stringMatching(/^cache\.bus\.channel: DEFAULTS has "fastify-write-buffer", README line \d+ says 'fwb'$/),
      expect.stringMatching(/^maxTimeMS: DEFAULTS has 5000, README line \d+ says \(default 6,000$/),
    ])
  })

  it('fails on an option missing from the table, and on a row that is no option', () => {
    const names = [...WRITE_BUFFER_OPTION_NAMES, 'maxRetries']
    expect(checkOptionDefaults(README, { ...built, WRITE_BUFFER_OPTION_NAMES: names }).failures)
      .toEqual(['option `maxRetries` is not in the options table'])
    const withoutRow = README.replace(/^\| `maxInFlight` .*\n/m, '')
    expect(checkOptionDefaults(withoutRow, built).failures).toEqual([
      'option `maxInFlight` is not in the options table',
      'maxInFlight: DEFAULTS has 16, the options table has no row for `maxInFlight`',
    ])
    const extraRow = README.replace('| `maxInFlight` |', '| `maxInflight` | 16 | typo |\n| `maxInFlight` |')
    expect(checkOptionDefaults(extraRow, built).failures).toEqual(['the options table has a row for `maxInflight`, which is no option'])
  })
})
