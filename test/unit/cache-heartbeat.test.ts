import { beforeEach, describe, expect, it } from 'vitest'
import { Heartbeat } from '../../src/cache/heartbeat.js'
import { FakeClock } from './fake-clock.js'

/** The cache bus's liveness rule, on a fake clock (test/cache-bus-frozen.test.ts freezes a real Redis). */

let clock: FakeClock
beforeEach(() => { clock = new FakeClock() })

function beat (offlineTtlMs: number): { hb: Heartbeat, events: string[] } {
  const events: string[] = []
  const hb = new Heartbeat(offlineTtlMs, { send: () => { events.push('send') }, stale: () => { events.push('stale') }, fresh: () => { events.push('fresh') } }, clock)
  return { hb, events }
}

describe('heartbeat', () => {
  it('its interval follows offlineTtlMs (÷ 5, within 50…100 ms); a freeze is noticed within 3 intervals (≤ 300 ms)', () => {
    expect([0, 250, 500, 60_000].map(t => [beat(t).hb.intervalMs, beat(t).hb.detectionMs])).toEqual([[50, 150], [50, 150], [100, 300], [100, 300]])
  })

  it('beats coming back keep it fresh; none for 2 intervals makes it stale once; one back makes it fresh', () => {
    const { hb, events } = beat(0)
    hb.start()
    hb.arm()
    for (let i = 0; i < 10; i++) { clock.advance(50); hb.beat() }
    expect(events.filter(e => e !== 'send')).toEqual([])
    clock.advance(150) // three ticks without a beat back
    expect(events.filter(e => e !== 'send')).toEqual(['stale'])
    clock.advance(500)
    expect(events.filter(e => e !== 'send')).toEqual(['stale'])
    hb.beat()
    expect(events.filter(e => e !== 'send')).toEqual(['stale', 'fresh'])
    expect(hb.sent).toBe(23) // one per interval, whatever comes back
    hb.stop()
  })

  it('no verdict before the subscription is confirmed, nor after it is lost (the bus is offline anyway)', () => {
    const { hb, events } = beat(0)
    hb.start()
    clock.advance(1000)
    hb.arm()
    hb.disarm()
    clock.advance(1000)
    hb.beat()
    expect(events.filter(e => e !== 'send')).toEqual([])
    hb.stop()
  })

  it('a tick that runs late (the event loop was blocked: beats may be waiting in the socket) gives no verdict', () => {
    const { hb, events } = beat(0)
    hb.start()
    hb.arm()
    clock.advance(50)
    hb.beat()
    // the loop blocked for 400 ms: the clock moves, the interval's callbacks did not run meanwhile
    clock.block(400)
    clock.advance(0)
    expect(events.filter(e => e !== 'send')).toEqual([])
    hb.stop()
  })
})
