// The measuring loop every DB suite uses.

/**
 * Calls `fn(i)` from `workers` concurrent loops until `minMs` have passed and at least
 * `minCalls` were started (never more than `maxCalls`). Returns the number of calls,
 * the wall time and each call's latency in ms.
 */
export async function timed ({ workers = 1, minMs = 0, minCalls = 1, maxCalls = Infinity }, fn) {
  const latencies = []
  let next = 0
  const start = performance.now()
  const more = () => next < maxCalls && (next < minCalls || performance.now() - start < minMs)
  const loop = async () => {
    while (more()) {
      const i = next++
      const t = performance.now()
      await fn(i)
      latencies.push(performance.now() - t)
    }
  }
  await Promise.all(Array.from({ length: workers }, loop))
  return { calls: latencies.length, elapsedMs: performance.now() - start, latencies }
}
