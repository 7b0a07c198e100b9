import type { Clock } from '../clock.js'
import { TwoWindows } from './two-windows.js'
import { createHistogram, type RecordableHistogram } from 'node:perf_hooks'

export interface LatencySummary {
  count: number
  p50: number
  p90: number
  p99: number
  max: number
}

const WINDOW_MS = 60_000
const EMPTY: LatencySummary = Object.freeze({ count: 0, p50: 0, p90: 0, p99: 0, max: 0 })

/**
 * A latency distribution over a sliding window of one to two minutes, in milliseconds, kept
 * in Node's own HDR histograms (perf_hooks.createHistogram) at microsecond resolution: the
 * current window and the previous one, merged when read. Recorded per batch, never per write.
 */
export class Latency {
  readonly #windows: TwoWindows<RecordableHistogram>

  constructor (readonly clock: Clock) { this.#windows = new TwoWindows(WINDOW_MS, createHistogram, clock.now()) }

  /** `now`: the clock's time, which the caller has just read (one clock read per batch less) */
  record (ms: number, now: number): void {
    this.#windows.at(now).current.record(Math.max(1, Math.round(ms * 1000)))
  }

  summary (): LatencySummary {
    const h = createHistogram()
    // what was recorded in the last one to two window lengths, without rotating
    for (const window of this.#windows.counting(this.clock.now())) h.add(window)
    if (h.count === 0) return EMPTY
    const ms = (us: number): number => Math.round(us) / 1000
    return { count: h.count, p50: ms(h.percentile(50)), p90: ms(h.percentile(90)), p99: ms(h.percentile(99)), max: ms(h.max) }
  }
}
