// Small numeric helpers shared by the suites.

/** p50 / p99 (nearest rank) of latency samples in ms; null without samples. */
export function latency (samples) {
  if (samples.length === 0) return { p50Ms: null, p99Ms: null }
  const sorted = Float64Array.from(samples).sort()
  const at = p => sorted[Math.max(1, Math.ceil((p / 100) * sorted.length)) - 1]
  return { p50Ms: round(at(50), 2), p99Ms: round(at(99), 2) }
}

export function round (x, digits = 0) {
  if (x === null || x === undefined || !Number.isFinite(x)) return null
  const f = 10 ** digits
  return Math.round(x * f) / f
}

export function rate (ops, elapsedMs) {
  return round(ops / (elapsedMs / 1000))
}

export function ratio (a, b) {
  return b > 0 ? round(a / b, 2) : null
}

export function per1k (count, writes) {
  return writes > 0 ? round((count / writes) * 1000, 1) : null
}

/** Sum of the values; null if any is missing (a reading not taken spoils the total, not zero). */
export function sum (values) {
  return values.some(v => v === null || v === undefined) ? null : values.reduce((a, b) => a + b, 0)
}

/** Mean of the values; null without values or if any is missing. */
export function mean (values) {
  const s = sum(values)
  return s === null || values.length === 0 ? null : s / values.length
}
