import { describe, expect, it } from 'vitest'
import { Ring } from '../../src/buffer/ring.js'

describe('Ring (the Dispatcher\'s ready and active queues)', () => {
  it('a deleted item added again goes to the back', () => {
    const ring = new Ring<string>()
    ring.add('a')
    ring.add('b')
    ring.delete('a')
    ring.add('a')
    expect([ring.shift(), ring.shift(), ring.shift()]).toEqual(['b', 'a', undefined])
    expect(ring.size).toBe(0)
  })

  it('holds O(live items) while items are deleted and added again and nothing shifts', () => {
    // the Dispatcher moves a queue to the back (delete + add) on every batch it sends, and
    // shifts its active ring only when something is due: 12 bytes a write leaked before
    const ring = new Ring<number>()
    for (let i = 0; i < 10; i++) ring.add(i)
    for (let round = 0; round < 100_000; round++) {
      const item = round % 10
      ring.delete(item)
      ring.add(item)
    }
    expect(ring.size).toBe(10)
    expect(ring.held).toBeLessThanOrEqual(2 * 10 + 1024 + 1)
    const order: number[] = []
    for (let item = ring.shift(); item !== undefined; item = ring.shift()) order.push(item)
    expect(order).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
  })

  it('shift skips deleted items; has and size follow', () => {
    const ring = new Ring<number>()
    for (let i = 0; i < 5000; i++) ring.add(i)
    for (let i = 0; i < 5000; i += 2) ring.delete(i)
    expect(ring.size).toBe(2500)
    expect(ring.has(2)).toBe(false)
    expect(ring.has(3)).toBe(true)
    const seen: number[] = []
    for (let item = ring.shift(); item !== undefined; item = ring.shift()) seen.push(item)
    expect(seen).toEqual(Array.from({ length: 2500 }, (_, k) => 2 * k + 1))
  })
})
