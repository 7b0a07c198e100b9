import { describe, expect, it } from 'vitest'
import { BSON, ObjectId } from 'mongodb'
import { estimateSize } from '../../src/write/bson-size.js'

/**
 * The size estimate bounds the real size from above: a batch kept under maxBatchBytes by its
 * estimates is then under it for real, and the driver (which splits a bulkWrite at 16 MiB)
 * sends it as one command.
 */
describe('the BSON size estimate', () => {
  const cjk = (n: number, seed: number): string => Array.from({ length: n }, (_, i) => String.fromCharCode(0x4e00 + ((seed * 31 + i * 7) % 5000))).join('')
  const docs: Array<[string, Record<string, unknown>]> = [
    ['ASCII', { _id: new ObjectId(), user: 'u1', kind: 'click', value: 42, at: new Date() }],
    ['CJK keys', Object.fromEntries(Array.from({ length: 200 }, (_, i) => [cjk(40, i) + String(i), true]))],
    ['emoji keys and values', { '😀😀😀': '😀', ['🎉'.repeat(30)]: '🎉'.repeat(100) }],
    ['nested, arrays', { a: { ['é'.repeat(50)]: [1, 'ü', { ['ß'.repeat(10)]: null }] } }],
  ]
  for (const [name, doc] of docs) {
    it(`is never short: ${name}`, () => {
      const estimate = estimateSize(doc, 0)
      expect(estimate).toBeGreaterThan(0)
      expect(estimate).toBeGreaterThanOrEqual(BSON.calculateObjectSize(doc))
    })
  }
})
