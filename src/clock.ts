/**
 * The buffer's time: one `now()` and its timers, passed in (the `clock` option, as lru-cache's
 * `perf`), the real one by default. Deadlines, fences, lingers, backoffs, the bus heartbeat and
 * the latency summaries read it, so each of their rules can be tested with a fake clock that
 * moves only when the test says (test/unit/fake-clock.ts) instead of by waiting. Nothing else in
 * src/ reads the time or sets a timer, except the Fastify plugin's start-up ping and close timeouts
 * (plugin.ts, mongo/connect.ts), which belong to the app's life, not to a write's.
 */
export interface Clock {
  /** Milliseconds since an arbitrary start, never going back (not a date). */
  now: () => number
  /** Runs `task` once, `ms` from now; the timer keeps the process alive until unref'd, as Node's. */
  setTimeout: (task: () => void, ms: number) => ClockTimer
  /** Cancels a timer not yet run; a timer already run or cancelled is ignored. */
  clearTimeout: (timer: ClockTimer) => void
}

/** A timer of a Clock; `unref()` lets the process exit while it is armed. */
export interface ClockTimer { unref: () => unknown }

/**
 * The real time: `performance.now()` (monotonic and sub-millisecond: a wall-clock step, NTP or a
 * VM resumed moves no deadline, and a round trip of a fraction of a millisecond is measured as
 * one) and Node's timers.
 */
export const realClock: Clock = {
  now: () => performance.now(),
  setTimeout: (task, ms) => setTimeout(task, ms),
  clearTimeout: timer => { clearTimeout(timer as NodeJS.Timeout) },
}

/** Whether `promise` resolves within `ms` on `clock` (a rejection passes through); the timer is ref'd, and cleared either way. */
export async function within (clock: Clock, promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ClockTimer | undefined
  try {
    return await Promise.race([promise.then(() => true), new Promise<boolean>(resolve => { timer = clock.setTimeout(() => { resolve(false) }, ms) })])
  } finally {
    if (timer !== undefined) clock.clearTimeout(timer)
  }
}

/** Resolves at `until` on `clock` (at once if it has passed); the timer is ref'd. */
export async function sleepUntil (clock: Clock, until: number): Promise<void> {
  await new Promise<void>(resolve => { clock.setTimeout(resolve, Math.max(0, until - clock.now())) })
}
