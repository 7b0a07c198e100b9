import { beforeEach, describe, expect, it } from 'vitest'
import { Heartbeat } from '../../src/cache/heartbeat.js'
import { FakeClock } from './fake-clock.js'

/**
 * A slow bus is not a healthy one (docs/server-behaviours.md: a heartbeat proves the bus is alive, not that it is prompt): beats that all come back, late, must not keep
 * it online. A fake clock; test/cache-bus-slow.test.ts delays a real Redis.
 */

let clock: FakeClock
beforeEach(() => { clock = new FakeClock(0) })

/** A heartbeat whose beats come back `echo.ms` after they are sent (changeable). */
function looped (echo: { ms: number }): { hb: Heartbeat, events: string[] } {
  const events: string[] = []
  const hb: Heartbeat = new Heartbeat(0, {
    send: sentAt => { clock.setTimeout(() => { hb.beat(sentAt) }, echo.ms) },
    stale: () => { events.push(`stale at ${clock.now()}`) },
    fresh: () => { events.push(`fresh at ${clock.now()}`) },
  }, clock)
  return { hb, events }
}

describe('heartbeat: promptness', () => {
  it('beats back within the deadline keep it fresh; from the moment every beat takes 1 s, it is stale within 3 intervals and stays so while beats keep arriving', () => {
    const echo = { ms: 5 }
    const { hb, events } = looped(echo)
    hb.start()
    hb.arm()
    clock.advance(1_000)
    expect(events).toEqual([])
    const slowFrom = clock.now()
    echo.ms = 1_000
    clock.advance(5_000)
    // was: stale when no beat had come back for 100 ms, then fresh again as the late ones arrived
    expect(events).toEqual([`stale at ${slowFrom + 150}`])
    expect(hb.received).toBeGreaterThan(80) // they did come back: alive, not prompt
    expect(hb.echoMs).toBe(1_000)
    // prompt again: the first beat back within the deadline (after the late ones queued before it) makes it fresh
    echo.ms = 5
    clock.advance(2_000)
    expect(events).toHaveLength(2)
    expect(events[1]).toMatch(/^fresh at /)
    hb.stop()
  })

  it('an echo just under the deadline (2 intervals) is prompt enough; just over, it is not', () => {
    for (const [ms, verdict] of [[95, []], [105, ['stale']]] as const) {
      const { hb, events } = looped({ ms })
      hb.start()
      hb.arm()
      clock.advance(2_000)
      expect(events.map(e => e.split(' ')[0])).toEqual(verdict)
      hb.stop()
    }
  })
})
