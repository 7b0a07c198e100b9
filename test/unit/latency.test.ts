import { afterEach, describe, expect, it, vi } from 'vitest'
import { Latency } from '../../src/buffer/latency.js'

afterEach(() => { vi.restoreAllMocks() })

describe('latency windows (stats() queueWaitMs / roundTripMs)', () => {
  it('shows the last one to two minutes: a sample from before a long idle gap is gone', () => {
    let now = 1_000
    vi.spyOn(performance, 'now').mockImplementation(() => now)
    const l = new Latency()
    l.record(500)
    now += 150_000 // 2.5 minutes without a batch
    l.record(2)
    expect(l.summary()).toMatchObject({ count: 1, max: 2 })
    now += 100_000
    expect(l.summary()).toMatchObject({ count: 1, max: 2 }) // 100 s old: still shown
    now += 30_000
    expect(l.summary()).toMatchObject({ count: 0 }) // 130 s old: gone
  })

  it('in steady use no sample older than two minutes is shown', () => {
    let now = 0
    vi.spyOn(performance, 'now').mockImplementation(() => now)
    const l = new Latency()
    l.record(7)
    now = 60_000
    l.record(1)
    now = 179_000
    expect(l.summary()).toMatchObject({ count: 1, max: 1 }) // the 7 ms sample is 179 s old: gone; the 1 ms one is 119 s old
  })
})
