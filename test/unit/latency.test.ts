import { describe, expect, it } from 'vitest'
import { Latency } from '../../src/buffer/latency.js'
import { FakeClock } from './fake-clock.js'

describe('latency windows (stats() queueWaitMs / roundTripMs)', () => {
  it('shows the last one to two minutes: a sample from before a long idle gap is gone', () => {
    const clock = new FakeClock(1_000)
    const l = new Latency(clock)
    l.record(500, clock.now())
    clock.advance(150_000) // 2.5 minutes without a batch
    l.record(2, clock.now())
    expect(l.summary()).toMatchObject({ count: 1, max: 2 })
    clock.advance(100_000)
    expect(l.summary()).toMatchObject({ count: 1, max: 2 }) // 100 s old: still shown
    clock.advance(30_000)
    expect(l.summary()).toMatchObject({ count: 0 }) // 130 s old: gone
  })

  it('in steady use no sample older than two minutes is shown', () => {
    const clock = new FakeClock(0)
    const l = new Latency(clock)
    l.record(7, clock.now())
    clock.advance(60_000)
    l.record(1, clock.now())
    clock.advance(119_000)
    expect(l.summary()).toMatchObject({ count: 1, max: 1 }) // the 7 ms sample is 179 s old: gone; the 1 ms one is 119 s old
  })
})
