import { describe, expect, it } from 'vitest'
import { Double, Int32, Long } from 'mongodb'
import { numeric } from '../../src/cache/bson-values.js'
import { valueHash, valueKeys } from '../../src/cache/value-keys.js'
import { targetOf, targetOfId } from '../../src/write/target.js'

/** Value keys (targets, index keys, bus hashes): one key per value the server tells apart, one value per key. */
describe('number keys', () => {
  it('equal numbers share a key whatever their BSON type, past 2^53 too', () => {
    for (const [a, b] of [
      [1, new Int32(1)], [1, Long.fromInt(1)], [1, new Double(1)], [0, -0], [0, new Double(-0)],
      [2 ** 60, Long.fromBigInt(2n ** 60n)], [2 ** 60, new Double(2 ** 60)], [2 ** 60, 2n ** 60n],
      [-(2 ** 63), Long.MIN_VALUE], [1.5, new Double(1.5)],
      // an unsigned Long's 64 bits are the signed int64 the server stores
      [Long.fromString('18446744073709551615', true), Long.fromInt(-1)],
    ] as Array<[unknown, unknown]>) {
      expect(targetOfId(a), `${String(a)} / ${String(b)}`).toBe(targetOfId(b))
      expect(valueKeys(a)).toEqual(valueKeys(b))
      expect(targetOf({ email: a, _id: 1 })).toBe(targetOf({ _id: 1, email: b }))
    }
  })

  it('different numbers never share a key (String(2 ** 60) is the text of another int64)', () => {
    for (const [a, b] of [
      [2 ** 60, Long.fromString('1152921504606847000')], [new Double(2 ** 60), Long.fromString('1152921504606847000')],
      [2 ** 53, 2n ** 53n + 1n], [1e21, Long.fromString('1000000000000000000000'.slice(0, 19))], [1, 1.5], [1, '1'],
    ] as Array<[unknown, unknown]>) {
      expect(targetOfId(a), `${String(a)} / ${String(b)}`).not.toBe(targetOfId(b))
      expect(valueHash('n', targetOfId(a))).not.toBe(valueHash('n', targetOfId(b)))
    }
    expect(numeric(Long.fromString('18446744073709551615', true))).toEqual({ kind: 'long', value: -1n })
  })
})
