import { describe, expect, it } from 'vitest'
import { Ring, RingLink } from '../../src/buffer/ring.js'

const links = (n: number): Array<RingLink<number>> => Array.from({ length: n }, (_, i) => new RingLink(i))
const drain = (ring: Ring<number>): number[] => {
  const out: number[] = []
  for (let item = ring.shift(); item !== undefined; item = ring.shift()) out.push(item)
  return out
}

describe('Ring (the Dispatcher\'s ready and active queues)', () => {
  it('a deleted item added again goes to the back; adding a present item keeps its place', () => {
    const ring = new Ring<string>()
    const a = new RingLink('a')
    const b = new RingLink('b')
    ring.add(a)
    ring.add(b)
    ring.add(a)
    ring.delete(a)
    ring.add(a)
    expect([ring.shift(), ring.shift(), ring.shift()]).toEqual(['b', 'a', undefined])
    expect(ring.size).toBe(0)
  })

  it('toBack moves an item to the back, or adds it', () => {
    const ring = new Ring<number>()
    const l = links(4)
    for (const link of l.slice(0, 3)) ring.add(link)
    ring.toBack(l[0] as RingLink<number>)
    ring.toBack(l[3] as RingLink<number>)
    ring.toBack(l[3] as RingLink<number>)
    expect(ring.size).toBe(4)
    expect(drain(ring)).toEqual([1, 2, 0, 3])
  })

  it('keeps order while items are deleted and added again and nothing shifts', () => {
    // the Dispatcher moves a queue to the back on every batch it sends
    const ring = new Ring<number>()
    const l = links(10)
    for (const link of l) ring.add(link)
    for (let round = 0; round < 100_000; round++) ring.toBack(l[round % 10] as RingLink<number>)
    expect(ring.size).toBe(10)
    expect(drain(ring)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
  })

  it('shift skips deleted items; linked and size follow; a link is in one ring at a time', () => {
    const ring = new Ring<number>()
    const l = links(5000)
    for (const link of l) ring.add(link)
    for (let i = 0; i < 5000; i += 2) ring.delete(l[i] as RingLink<number>)
    ring.delete(l[0] as RingLink<number>) // twice: a no-op
    expect(ring.size).toBe(2500)
    expect((l[2] as RingLink<number>).linked).toBe(false)
    expect((l[3] as RingLink<number>).linked).toBe(true)
    expect(drain(ring)).toEqual(Array.from({ length: 2500 }, (_, k) => 2 * k + 1))
    expect((l[3] as RingLink<number>).linked).toBe(false)
  })
})
