// What each caller of the overload suite was told, and when, to compare with what the database
// holds afterwards (as test/support/ledger.ts does for the fault tests): every write carries a
// unique marker `m`; after the run
//   acknowledged → exactly one document with its marker (else lost);
//   told 'not-sent' or 'rejected' → none (else phantom);
//   'unknown' → zero or one;
//   never two (applied twice).
import { latency } from './stats.mjs'

export const OUTCOMES = ['acknowledged', 'rejected', 'not-sent', 'unknown', 'other']

export class Ledger {
  /** { m, issuedAt, settledAt, outcome } per write, in the order they were issued */
  entries = []
  unsettled = 0

  /** Records `promise`'s outcome for the write with marker `m`, issued at `issuedAt` (performance.now()). */
  track (m, issuedAt, promise) {
    const e = { m, issuedAt, settledAt: NaN, outcome: '' }
    this.entries.push(e)
    this.unsettled++
    promise.then(
      () => { e.settledAt = performance.now(); e.outcome = 'acknowledged'; this.unsettled-- },
      err => {
        e.settledAt = performance.now()
        e.outcome = OUTCOMES.includes(err?.outcome) ? err.outcome : 'other'
        if (e.outcome === 'other') e.error = `${err?.code ?? ''} ${err?.message ?? err}`
        this.unsettled--
      })
    return promise.catch(() => {})
  }
}

/** Outcomes by kind of `entries`. */
export function outcomesOf (entries) {
  const by = Object.fromEntries(OUTCOMES.map(k => [k, 0]))
  for (const e of entries) by[e.outcome === '' ? 'other' : e.outcome]++
  return by
}

/** p50 / p99 (ms) of the acknowledged writes among `entries`. */
export function ackLatency (entries) {
  const samples = []
  for (const e of entries) if (e.outcome === 'acknowledged') samples.push(e.settledAt - e.issuedAt)
  return latency(samples)
}

/** The ledger against the documents of `collections` (markers counted over every document of them all). */
export async function audit (collections, entries) {
  const copies = new Map()
  for (const collection of collections) {
    for await (const d of collection.find({}, { projection: { _id: 0, m: 1 } })) copies.set(d.m, (copies.get(d.m) ?? 0) + 1)
  }
  let lost = 0; let duplicated = 0; let phantom = 0; let unknownApplied = 0; let unsettled = 0
  for (const e of entries) {
    const n = copies.get(e.m) ?? 0
    if (n > 1) duplicated++
    if (e.outcome === '') unsettled++
    else if (e.outcome === 'acknowledged') { if (n === 0) lost++ } else if (e.outcome === 'unknown') { if (n > 0) unknownApplied++ } else if (n > 0) phantom++
  }
  return { documents: [...copies.values()].reduce((a, b) => a + b, 0), lost, duplicated, phantom, unknownApplied, unsettled }
}
