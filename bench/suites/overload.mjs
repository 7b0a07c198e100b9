// Suite: overload (issue item 4). The buffer in front of two servers that push back, through a
// proxy in front of the real server (bench/overload-proxy-worker.mjs):
//   (a) queue: one worker serves the write commands one at a time, each held (its writes × a
//       fixed service time) and then run on the server, so a command's round trip grows with the
//       commands the server holds. A closed loop of awaited insertOne callers, swept over fixed
//       limits (maxInFlight 1..16; today's default is 4), and the adaptive in-flight limit when
//       the built library has one.
//   (b) bucket: a token bucket of R writes/s that refuses a command with 462
//       IngressRequestRateLimitExceeded (SystemOverloadedError + RetryableError, nothing applied)
//       when out of tokens, as MongoDB 8.2's ingress limiter does. Open-loop load: 0.5 R (calm),
//       3 R (overload), 0.5 R (after), for today's fixed 4 and the adaptive limit.
// Every row is checked against the database afterwards (bench/overload-ledger.mjs): no write
// lost, none applied twice, none told 'unknown'. Targets are printed, never failed on.
//   npm run build && MONGODB_URI=mongodb://… node bench/suites/overload.mjs [--quick]
import { MongoClient } from 'mongodb'
import { setTimeout as sleep } from 'node:timers/promises'
import { WriteBuffer } from '../../dist/index.js'
import { Ledger, ackLatency, audit, outcomesOf } from '../overload-ledger.mjs'
import { OverloadProxy } from '../overload-proxy.mjs'
import { withProgress } from '../progress.mjs'
import { latency, per1k, ratio, round } from '../stats.mjs'

/**
 * (a): awaited callers of the closed loop, spread over COLLECTIONS collections (the buffer sends
 * one batch per collection at a time, until 500 inserts wait for one: with one collection the
 * in-flight limit would never be reached), and the queue's service time per write
 */
const CALLERS = 400
const COLLECTIONS = 16
const SERVICE_US = 200
/**
 * (b): the bucket's rate (writes/s) and burst (tokens: a command takes one per write, so the burst
 * is the buffer's largest batch, maxBatchSize's default), and the offered load in multiples of the rate
 */
const BUCKET_RATE = 1000
const BUCKET_BURST = 1000
const CALM = 0.5
const OVER = 3
/**
 * (b): every write's deadline (writeTimeoutMs), as an API with a latency budget gives one: a
 * write the server cannot take within it is told not-sent (shed at the door, or by its
 * deadline) instead of waiting in a backlog that outlives the overload
 */
const DEADLINE_MS = Number(process.env.FWB_BENCH_DEADLINE_MS ?? 400)
/** the open-loop generator's tick */
const TICK_MS = 5
/** (b): the windows (by issue time) in which the writes after the overload are judged at full speed or not */
const WINDOW_MS = 100
/** the options of today's build (before the adaptive limit): anything else a build lists is a candidate for it */
const OPTIONS_BEFORE = new Set(['maxBatchSize', 'maxBatchBytes', 'lingerMs', 'flushIntervalMs', 'maxPending', 'maxPendingBytes', 'onFull', 'maxInFlight', 'coalesce', 'writeConcern', 'writeTimeoutMs', 'maxTimeMS', 'closeTimeoutMs', 'retry', 'cache', 'logger', 'tracerProvider', 'onWriteError'])
const NOT_AVAILABLE = 'adaptive: not available in this build'

/** p90 (nearest rank) of the latencies of `entries`, in ms */
function p90 (entries) {
  const sorted = Float64Array.from(entries, e => e.settledAt - e.issuedAt).sort()
  return round(sorted[Math.max(1, Math.ceil(0.9 * sorted.length)) - 1], 2)
}
const fmt = (x, unit = '') => (x === null || x === undefined ? 'n/a' : `${x.toLocaleString('en-US')}${unit}`)
const doc = m => ({ m, kind: 'click', user: `u${m % 1000}`, at: new Date() })

/**
 * How this build chooses the in-flight limit, found at run time: `{ adaptive, fixed(k), how }`,
 * or `{ adaptive: undefined, fixed(k), how }` when it has no adaptive limit. A candidate is taken
 * when the options resolve, a buffer accepts them, and either its stats() report `inFlightLimit`
 * or the resolved options say 'adaptive' (an option not named for the limit: only the latter). FWB_BENCH_ADAPTIVE_OPTIONS (JSON) names the options
 * instead, and FWB_BENCH_FIXED_OPTIONS (JSON, merged under { maxInFlight: k }) the fixed ones.
 */
export async function inFlightModes (db) {
  let resolveOptions
  let names = []
  let defaults = {}
  try {
    const o = await import('../../dist/options.js')
    resolveOptions = o.resolveOptions
    names = o.WRITE_BUFFER_OPTION_NAMES ?? []
    defaults = o.DEFAULTS ?? {}
  } catch {}
  const fixedExtra = process.env.FWB_BENCH_FIXED_OPTIONS ? JSON.parse(process.env.FWB_BENCH_FIXED_OPTIONS) : undefined
  const candidates = []
  if (process.env.FWB_BENCH_ADAPTIVE_OPTIONS) {
    candidates.push({ adaptive: JSON.parse(process.env.FWB_BENCH_ADAPTIVE_OPTIONS), fixed: fixedExtra ?? {}, how: `FWB_BENCH_ADAPTIVE_OPTIONS=${process.env.FWB_BENCH_ADAPTIVE_OPTIONS}` })
  } else {
    // new options named for the limit first; any other new option only if its resolved value says 'adaptive'
    const named = n => /in.?flight|adapt|concurren/i.test(n)
    const added = names.filter(n => !OPTIONS_BEFORE.has(n)).sort((a, b) => Number(named(b)) - Number(named(a)))
    for (const name of added) {
      const d = defaults[name]
      const before = candidates.length
      if (typeof d === 'string' || d === undefined) candidates.push({ adaptive: { [name]: 'adaptive' }, fixed: { [name]: 'fixed' } })
      if (typeof d === 'boolean' || d === undefined) candidates.push({ adaptive: { [name]: true }, fixed: { [name]: false } })
      if (d !== null && typeof d === 'object') {
        candidates.push({ adaptive: { [name]: { ...d, mode: 'adaptive' } }, fixed: { [name]: { ...d, mode: 'fixed' } } })
        candidates.push({ adaptive: { [name]: 'adaptive' }, fixed: { [name]: 'fixed' } })
      }
      for (const c of candidates.slice(before)) c.named = named(name)
    }
    candidates.push({ adaptive: { maxInFlight: 'adaptive' }, fixed: {}, named: true })
  }
  const accepts = options => {
    try {
      const resolved = resolveOptions?.(options)
      const wb = new WriteBuffer(db, options)
      const stats = wb.stats()
      wb.close().catch(() => {})
      return { resolved, stats }
    } catch {
      return undefined
    }
  }
  for (const c of candidates) {
    const got = accepts(c.adaptive)
    if (got === undefined) continue
    const says = c.how !== undefined || JSON.stringify(got.resolved ?? {}).includes('adaptive') || (c.named && typeof got.stats.inFlightLimit === 'number')
    if (!says) continue
    const fixedBase = fixedExtra ?? c.fixed
    const fixed = accepts({ ...fixedBase, maxInFlight: 4 }) === undefined ? {} : fixedBase
    return { adaptive: c.adaptive, fixed: k => ({ ...fixed, maxInFlight: k }), how: c.how ?? `options ${JSON.stringify(c.adaptive)}; fixed rows ${JSON.stringify({ ...fixed, maxInFlight: 'k' })}` }
  }
  return { adaptive: undefined, fixed: k => ({ ...(fixedExtra ?? {}), maxInFlight: k }), how: NOT_AVAILABLE }
}

/** Samples stats().inFlightLimit (when the build reports it) and inFlight while the row runs. */
function limitSampler (wb) {
  const limits = []
  const paces = [] // stats().overloadPace while paced (writes/s), where the build has it
  let maxInFlight = 0
  const timer = setInterval(() => {
    const s = wb.stats()
    if (typeof s.inFlightLimit === 'number') limits.push(s.inFlightLimit)
    if (typeof s.overloadPace === 'number' && s.overloadPace > 0) paces.push(s.overloadPace)
    maxInFlight = Math.max(maxInFlight, s.inFlight)
  }, 25)
  return {
    stop () {
      clearInterval(timer)
      const mean = limits.length === 0 ? null : round(limits.reduce((a, b) => a + b, 0) / limits.length, 1)
      paces.sort((a, b) => a - b)
      const pace = paces.length === 0 ? null : { p10: paces[Math.floor(paces.length / 10)], p50: paces[Math.floor(paces.length / 2)], samples: paces.length }
      return { meanLimit: mean, lastLimit: limits.at(-1) ?? null, maxInFlight, pace }
    },
  }
}

/** Waits until every write of `ledger` settled, at most `ms`. */
async function settled (ledger, ms) {
  const until = performance.now() + ms
  while (ledger.unsettled > 0 && performance.now() < until) await sleep(20)
}

async function checked (colls, entries, mismatches, label) {
  const a = await audit(colls, entries)
  const outcomes = outcomesOf(entries)
  if (a.lost > 0) mismatches.push(`${label}: ${a.lost} acknowledged writes not in the database`)
  if (a.duplicated > 0) mismatches.push(`${label}: ${a.duplicated} writes applied twice`)
  if (a.phantom > 0) mismatches.push(`${label}: ${a.phantom} writes told not written are in the database`)
  if (a.unsettled > 0) mismatches.push(`${label}: ${a.unsettled} writes never settled`)
  if (outcomes.unknown > 0) mismatches.push(`${label}: ${outcomes.unknown} writes told 'unknown'`)
  if (outcomes.other > 0) mismatches.push(`${label}: ${outcomes.other} writes failed without an outcome (${entries.find(e => e.outcome === 'other')?.error})`)
  for (const coll of colls) await coll.drop().catch(() => {})
  return { audit: a, outcomes }
}

/** (a) one row: CALLERS awaited insertOne callers in a loop through the queue, `warmS` then `rowS` measured. */
async function queueRow ({ uri, proxy, direct, options, key, name, warmS, rowS, mismatches }) {
  const prefix = `queue_${key}_`
  const names = Array.from({ length: COLLECTIONS }, (_, i) => `${prefix}${i}`)
  await proxy.policy({ mode: 'queue', prefix, serviceUs: SERVICE_US })
  const client = new MongoClient(proxy.uri(uri))
  await client.connect()
  const wb = new WriteBuffer(client.db(direct.databaseName), options)
  const handles = names.map(n => wb.collection(n))
  const ledger = new Ledger()
  let next = 0
  const run = { stop: false }
  const caller = async c => {
    while (!run.stop) {
      const m = next++
      await ledger.track(m, performance.now(), c.insertOne(doc(m)))
    }
  }
  const callers = Array.from({ length: CALLERS }, (_, i) => caller(handles[i % COLLECTIONS]))
  await sleep(warmS * 1000)
  await proxy.resetStats()
  const sampler = limitSampler(wb)
  const t0 = performance.now()
  await sleep(rowS * 1000)
  const t1 = performance.now()
  const sampled = sampler.stop()
  const px = await proxy.stats()
  // the buffer's own view: its commands' round trips (which grow with the commands the server
  // holds) and how long a batch's oldest write waited to be sent, over this row's buffer's life
  const { roundTripMs, queueWaitMs } = wb.stats()
  run.stop = true
  await Promise.all(callers)
  await wb.close()
  await client.close()
  const inWindow = ledger.entries.filter(e => e.settledAt >= t0 && e.settledAt <= t1)
  const acked = inWindow.filter(e => e.outcome === 'acknowledged').length
  const { audit: a, outcomes } = await checked(names.map(n => direct.collection(n)), ledger.entries, mismatches, name)
  const { p50Ms, p99Ms } = ackLatency(inWindow)
  const row = {
    key: `queue-${key}`,
    part: 'queue',
    name: `(a) queue, ${name}`,
    label: name,
    limit: options.maxInFlight ?? null,
    adaptive: key === 'adaptive',
    rate: Math.round(acked / ((t1 - t0) / 1000)),
    p50Ms,
    p99Ms,
    dbCommandsPer1kWrites: per1k(px.commands, acked),
    sentVsAccepted: ratio(px.commands, px.accepted),
    avgBatch: round(px.statements / px.commands, 1),
    roundTripP50Ms: round(roundTripMs.p50, 2),
    queueWaitP50Ms: round(queueWaitMs.p50, 2),
    maxQueuedAtServer: px.maxQueued,
    ...sampled,
    outcomes,
    lost: a.lost,
    duplicated: a.duplicated,
    phantom: a.phantom,
    documents: a.documents,
    writes: ledger.entries.length,
  }
  row.details = `avg batch ${fmt(row.avgBatch)}; command round trip p50 ${fmt(row.roundTripP50Ms)} ms, oldest write's wait to be sent p50 ${fmt(row.queueWaitP50Ms)} ms; at most ${fmt(row.maxQueuedAtServer)} commands at the server, ${fmt(row.maxInFlight)} in flight` +
    (row.meanLimit === null ? '' : `; inFlightLimit mean ${fmt(row.meanLimit)}, last ${fmt(row.lastLimit)}`) +
    `; ${outcomeText(outcomes)}; lost ${a.lost}, applied twice ${a.duplicated}`
  return row
}

const outcomeText = o => `acknowledged ${fmt(o.acknowledged)} / rejected ${fmt(o.rejected)} / not-sent ${fmt(o['not-sent'])} / unknown ${fmt(o.unknown)}` + (o.other > 0 ? ` / other ${fmt(o.other)}` : '')

/** (b) one row: open-loop insertOne at CALM × R for calmS, OVER × R for overloadS, CALM × R for afterS. */
async function bucketRow ({ uri, proxy, direct, options, clientOptions = {}, key, name, calmS, overloadS, afterS, settleS, mismatches }) {
  const coll = `bucket_${key}`
  await proxy.policy({ mode: 'bucket', prefix: coll, ratePerS: BUCKET_RATE, burst: BUCKET_BURST, asMongoDB: true })
  const client = new MongoClient(proxy.uri(uri), clientOptions)
  await client.connect()
  const wb = new WriteBuffer(client.db(direct.databaseName), { ...options, writeTimeoutMs: DEADLINE_MS })
  const c = wb.collection(coll)
  const ledger = new Ledger()
  const phases = [{ rate: CALM * BUCKET_RATE, s: calmS }, { rate: OVER * BUCKET_RATE, s: overloadS }, { rate: CALM * BUCKET_RATE, s: afterS }]
  const marks = [] // each phase's start, and the end
  const snaps = []
  let maxPending = 0
  const sampler = limitSampler(wb)
  let m = 0
  for (const phase of phases) {
    const start = performance.now()
    marks.push(start)
    snaps.push(await proxy.stats())
    let issued = 0
    for (let now = start; now - start < phase.s * 1000; now = performance.now()) {
      const due = Math.floor(((now - start) / 1000) * phase.rate)
      for (; issued < due; issued++) {
        const i = m++
        ledger.track(i, now, c.insertOne(doc(i)))
      }
      maxPending = Math.max(maxPending, wb.stats().pending)
      await sleep(TICK_MS)
    }
  }
  marks.push(performance.now())
  snaps.push(await proxy.stats())
  const sampled = sampler.stop()
  const pendingAtEnd = wb.stats().pending
  await settled(ledger, settleS * 1000)
  await wb.close()
  await settled(ledger, 2000)
  await client.close()
  const [, overStart, overEnd, end] = marks
  const issuedIn = (a, b) => ledger.entries.filter(e => e.issuedAt >= a && e.issuedAt < b)
  const calm = issuedIn(marks[0], overStart)
  const over = issuedIn(overStart, overEnd)
  const after = issuedIn(overEnd, end)
  const ackedDuring = ledger.entries.filter(e => e.outcome === 'acknowledged' && e.settledAt >= overStart && e.settledAt < overEnd).length
  // the bucket starts the overload full: the tokens it held then (and spent by its end) are its
  // burst, not its rate, and are taken off the writes acknowledged during the overload
  const burstSpent = Math.max(0, snaps[1].tokens - snaps[2].tokens)
  const goodput = Math.round(Math.max(0, ackedDuring - burstSpent) / ((overEnd - overStart) / 1000))
  const px = { commands: snaps[2].commands - snaps[1].commands, accepted: snaps[2].accepted - snaps[1].accepted, refused: snaps[2].refused - snaps[1].refused }
  const all = { commands: snaps[3].commands - snaps[0].commands, accepted: snaps[3].accepted - snaps[0].accepted }
  const calmLatency = ackLatency(calm)
  // full speed again: the writes issued after the overload, in windows of WINDOW_MS by issue
  // time; from the first window from which on every window's writes were all acknowledged, at
  // p90 within max(2 × the calm phase's p99, 20 ms)
  const boundMs = Math.max(2 * (calmLatency.p99Ms ?? 0), 20)
  const windows = []
  for (const e of after) (windows[Math.floor((e.issuedAt - overEnd) / WINDOW_MS)] ??= []).push(e)
  const fullSpeed = w => w !== undefined && w.every(e => e.outcome === 'acknowledged') && p90(w) <= boundMs
  let from = windows.length
  while (from > 0 && fullSpeed(windows[from - 1])) from--
  const recoveryMs = from === windows.length ? null : from * WINDOW_MS
  const afterWindows = windows.map((w, i) => ({ fromMs: i * WINDOW_MS, writes: w?.length ?? 0, acknowledged: w?.filter(e => e.outcome === 'acknowledged').length ?? 0, p90Ms: w === undefined ? null : p90(w) }))
  const { audit: a, outcomes } = await checked([direct.collection(coll)], ledger.entries, mismatches, name)
  const overOutcomes = outcomesOf(over)
  const notSentWaits = ledger.entries.filter(e => e.outcome === 'not-sent').map(e => e.settledAt - e.issuedAt)
  const overAcked = ackLatency(over)
  const beyond = ledger.entries.length - outcomes.acknowledged
  const row = {
    key: `bucket-${key}`,
    part: 'bucket',
    name: `(b) token bucket, ${name}`,
    label: name,
    adaptive: key.startsWith('adaptive'),
    rate: goodput,
    goodputVsLimit: ratio(goodput, BUCKET_RATE),
    acknowledgedDuringOverload: ackedDuring,
    burstSpent,
    p50Ms: overAcked.p50Ms,
    p99Ms: overAcked.p99Ms,
    calmP50Ms: calmLatency.p50Ms,
    calmP99Ms: calmLatency.p99Ms,
    afterP50Ms: ackLatency(after).p50Ms,
    afterP99Ms: ackLatency(after).p99Ms,
    afterOutcomes: outcomesOf(after),
    dbCommandsPer1kWrites: per1k(px.commands, ackedDuring),
    commandsSent: px.commands,
    commandsAccepted: px.accepted,
    sentVsAccepted: ratio(px.commands, px.accepted),
    sentVsAcceptedWholeRun: ratio(all.commands, all.accepted),
    recoveryMs,
    recoveryBoundMs: round(boundMs, 1),
    afterWindows,
    offered: ledger.entries.length,
    offeredDuringOverload: over.length,
    beyondServed: beyond,
    toldNotSent: outcomes['not-sent'],
    notSentWait: notSentWaits.length === 0 ? null : latency(notSentWaits),
    maxPending,
    pendingAtOverloadEnd: pendingAtEnd,
    ...sampled,
    outcomes,
    overloadOutcomes: overOutcomes,
    lost: a.lost,
    duplicated: a.duplicated,
    phantom: a.phantom,
    documents: a.documents,
  }
  row.details = `goodput ${fmt(row.goodputVsLimit, 'x')} the limit; sent ÷ accepted ${fmt(row.sentVsAccepted)} (${fmt(px.commands)} ÷ ${fmt(px.accepted)}); ` +
    `back to full speed ${row.recoveryMs === null ? 'not within the run' : `${fmt(row.recoveryMs)} ms`}; ${outcomeText(outcomes)}; lost ${a.lost}, applied twice ${a.duplicated}` +
    (row.meanLimit === null ? '' : `; inFlightLimit mean ${fmt(row.meanLimit)}`)
  return row
}

function queueTable (rows, adaptiveHow) {
  const lines = [
    `**(a) queue** (one worker, ${SERVICE_US} µs per write + the server's own time; ${CALLERS} awaited callers over ${COLLECTIONS} collections)`,
    '',
    '| in-flight limit | goodput (acknowledged/s) | ÷ best fixed | sent ÷ accepted | p50 ms | p99 ms | avg batch | command round trip p50 ms | oldest write\'s wait to be sent p50 ms | stats().inFlightLimit mean | acknowledged / rejected / not-sent / unknown | lost / applied twice |',
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|---|',
  ]
  const best = Math.max(...rows.filter(r => !r.adaptive).map(r => r.rate))
  for (const r of rows) {
    const o = r.outcomes
    lines.push(`| ${r.label} | ${fmt(r.rate)} | ${fmt(ratio(r.rate, best))} | ${fmt(r.sentVsAccepted)} | ${fmt(r.p50Ms)} | ${fmt(r.p99Ms)} | ${fmt(r.avgBatch)} | ${fmt(r.roundTripP50Ms)} | ${fmt(r.queueWaitP50Ms)} | ${fmt(r.meanLimit)} | ${fmt(o.acknowledged)} / ${fmt(o.rejected)} / ${fmt(o['not-sent'])} / ${fmt(o.unknown)} | ${r.lost} / ${r.duplicated} |`)
  }
  if (!rows.some(r => r.adaptive)) lines.push(`| ${NOT_AVAILABLE} | | | | | | | | | | | |`)
  else lines.push('', `Adaptive: ${adaptiveHow}.`)
  return lines.join('\n')
}

function bucketTable (rows) {
  const lines = [
    `**(b) token bucket** (${BUCKET_RATE} writes/s, burst ${BUCKET_BURST}; 462 + SystemOverloadedError + RetryableError when empty; offered ${CALM}x, ${OVER}x, ${CALM}x; every write with writeTimeoutMs ${DEADLINE_MS}; the driver's defaults, its own overload retries included)`,
    '',
    '| in-flight limit | goodput during overload (acknowledged/s) | ÷ limit | sent ÷ accepted | p50 ms | p99 ms | acknowledged / rejected / not-sent / unknown | beyond served → told not-sent | back to full speed | stats().inFlightLimit mean | lost / applied twice |',
    '|---|--:|--:|--:|--:|--:|---|---|--:|--:|---|',
  ]
  for (const r of rows) {
    const o = r.outcomes
    lines.push(`| ${r.label} | ${fmt(r.rate)} | ${fmt(r.goodputVsLimit)} | ${fmt(r.sentVsAccepted)} | ${fmt(r.p50Ms)} | ${fmt(r.p99Ms)} | ${fmt(o.acknowledged)} / ${fmt(o.rejected)} / ${fmt(o['not-sent'])} / ${fmt(o.unknown)} | ${fmt(r.beyondServed)} → ${fmt(r.toldNotSent)} | ${r.recoveryMs === null ? 'not within the run' : `${fmt(r.recoveryMs)} ms`} | ${fmt(r.meanLimit)} | ${r.lost} / ${r.duplicated} |`)
  }
  if (!rows.some(r => r.adaptive)) lines.push(`| ${NOT_AVAILABLE} | | | | | | | | | | |`)
  return lines.join('\n')
}

/** The issue's targets for this suite, as ratios; printed, never failed on. */
function overloadTargets (queueRows, bucketRows) {
  const fixed = queueRows.filter(r => !r.adaptive)
  const best = fixed.reduce((a, b) => (b.rate > a.rate ? b : a))
  const adaptive = queueRows.find(r => r.adaptive)
  const targets = []
  targets.push({
    suite: 'overload',
    target: 'Overload (a) queue: adaptive in-flight limit ≥ 0.95x the best fixed limit\'s throughput, p50 ≤ 1.3x that limit\'s',
    measured: adaptive === undefined
      ? NOT_AVAILABLE
      : `${fmt(ratio(adaptive.rate, best.rate), 'x')} throughput, ${fmt(ratio(adaptive.p50Ms, best.p50Ms), 'x')} p50 (best fixed: ${best.limit}, ${fmt(best.rate)}/s, p50 ${fmt(best.p50Ms)} ms)`,
    met: adaptive !== undefined && adaptive.rate >= 0.95 * best.rate && adaptive.p50Ms <= 1.3 * best.p50Ms,
    notes: `fixed 4: ${fmt(ratio(fixed.find(r => r.limit === 4)?.rate, best.rate), 'x')} the best fixed throughput, p50 ${fmt(ratio(fixed.find(r => r.limit === 4)?.p50Ms, best.p50Ms), 'x')}`,
  })
  for (const r of bucketRows) {
    const o = r.outcomes
    const checks = [
      ['goodput ≥ 0.9x limit', r.goodputVsLimit >= 0.9, `${fmt(r.goodputVsLimit, 'x')}`],
      ['sent ≤ 1.5x accepted', r.sentVsAccepted !== null && r.sentVsAccepted <= 1.5, `${fmt(r.sentVsAccepted, 'x')}`],
      ['0 unknown / lost / applied twice', o.unknown === 0 && r.lost === 0 && r.duplicated === 0, `${o.unknown} / ${r.lost} / ${r.duplicated}`],
      ['every write not served told not-sent', r.toldNotSent === r.beyondServed && o.other === 0, `${fmt(r.toldNotSent)} of ${fmt(r.beyondServed)}`],
      ['full speed ≤ 1 s after', r.recoveryMs !== null && r.recoveryMs <= 1000, r.recoveryMs === null ? 'not within the run' : `${fmt(round(r.recoveryMs / 1000, 2), ' s')}`],
    ]
    targets.push({
      suite: 'overload',
      target: `Overload (b) token bucket, ${r.label}: goodput ≥ 0.9x the limiter's rate during overload; commands sent ≤ 1.5x accepted; 0 unknown/lost/applied twice; every write beyond what can be served told not-sent; full speed ≤ 1 s after the overload`,
      measured: checks.map(([what, , m]) => `${what}: ${m}${checks.find(c => c[0] === what)[1] ? ' ✓' : ' ✗'}`).join('; '),
      met: checks.every(c => c[1]),
      notes: `p50 / p99 of acknowledged writes issued during the overload ${fmt(r.p50Ms)} / ${fmt(r.p99Ms)} ms (calm ${fmt(r.calmP50Ms)} / ${fmt(r.calmP99Ms)}, after ${fmt(r.afterP50Ms)} / ${fmt(r.afterP99Ms)}: ${outcomeText(r.afterOutcomes)}); most writes pending ${fmt(r.maxPending)}; not-sent told after p50 ${fmt(r.notSentWait?.p50Ms)} ms, p99 ${fmt(r.notSentWait?.p99Ms)} ms`,
    })
  }
  if (!bucketRows.some(r => r.adaptive)) {
    targets.push({ suite: 'overload', target: 'Overload (b) token bucket, adaptive in-flight limit: the same targets', measured: NOT_AVAILABLE, met: false, notes: '' })
  }
  return targets
}

export async function overloadSuite ({ uri, overloadLimits, overloadWarmS = 1, overloadRowS = 3, overloadCalmS = 3, overloadS = 20, overloadAfterS = 10, overloadSettleS = 30 }) {
  const limits = overloadLimits ?? Array.from({ length: 16 }, (_, i) => i + 1)
  const direct = new MongoClient(uri)
  await direct.connect()
  const db = direct.db('fwb_bench_overload')
  await db.dropDatabase()
  const modes = await inFlightModes(db)
  // fixed 4 was the default until the adaptive limit (which a build that has it may make the default)
  const FIXED_4 = modes.adaptive === undefined ? 'fixed 4 (today\'s default)' : 'fixed 4 (the default before the adaptive limit)'
  const proxy = await OverloadProxy.start(uri)
  const mismatches = []
  const queueRows = []
  const bucketRows = []
  try {
    const common = { uri, proxy, direct: db, mismatches }
    await withProgress(`overload (a): queue, in-flight limits ${limits.join(', ')}${modes.adaptive === undefined ? '' : ' and adaptive'}`, async () => {
      // untimed: the JIT compiles the buffer, the driver and the proxy before the first row
      await queueRow({ ...common, options: modes.fixed(4), key: 'warm', name: 'warm-up', warmS: 0, rowS: overloadWarmS })
      for (const k of limits) queueRows.push(await queueRow({ ...common, options: modes.fixed(k), key: `fixed-${k}`, name: k === 4 ? FIXED_4 : `fixed ${k}`, warmS: overloadWarmS, rowS: overloadRowS }))
      if (modes.adaptive !== undefined) queueRows.push(await queueRow({ ...common, options: modes.adaptive, key: 'adaptive', name: 'adaptive', warmS: overloadWarmS, rowS: overloadRowS }))
    })
    await withProgress(`overload (b): token bucket, ${CALM}x / ${OVER}x / ${CALM}x its rate for ${overloadCalmS} / ${overloadS} / ${overloadAfterS} s`, async () => {
      const b = { ...common, calmS: overloadCalmS, overloadS, afterS: overloadAfterS, settleS: overloadSettleS }
      bucketRows.push(await bucketRow({ ...b, options: modes.fixed(4), key: 'fixed-4', name: FIXED_4 }))
      if (modes.adaptive !== undefined) {
        bucketRows.push(await bucketRow({ ...b, options: modes.adaptive, key: 'adaptive', name: 'adaptive' }))
        // the driver's own overload retries (maxAdaptiveRetries, 2 by default) off: the buffer's pace alone decides when a refused batch goes again
        bucketRows.push(await bucketRow({ ...b, options: modes.adaptive, clientOptions: { maxAdaptiveRetries: 0 }, key: 'adaptive-driver-retries-0', name: 'adaptive, client maxAdaptiveRetries 0' }))
      }
    })
  } finally {
    await proxy.close()
    await db.dropDatabase().catch(() => {})
    await direct.close()
  }
  const fixedRows = queueRows.filter(r => !r.adaptive)
  const best = fixedRows.reduce((a, b) => (b.rate > a.rate ? b : a))
  const fixed4 = fixedRows.find(r => r.limit === 4)
  const adaptiveQ = queueRows.find(r => r.adaptive)
  const [bucket4, bucketA] = [bucketRows.find(r => !r.adaptive), bucketRows.find(r => r.adaptive)]
  const ratios = Object.fromEntries(Object.entries({
    fixed4VsBestFixed: ratio(fixed4?.rate, best.rate),
    fixed4P50VsBestFixed: ratio(fixed4?.p50Ms, best.p50Ms),
    adaptiveVsBestFixed: adaptiveQ === undefined ? null : ratio(adaptiveQ.rate, best.rate),
    adaptiveP50VsBestFixed: adaptiveQ === undefined ? null : ratio(adaptiveQ.p50Ms, best.p50Ms),
    bucketFixed4GoodputVsLimit: bucket4?.goodputVsLimit,
    bucketFixed4SentVsAccepted: bucket4?.sentVsAccepted,
    bucketAdaptiveGoodputVsLimit: bucketA?.goodputVsLimit,
    bucketAdaptiveSentVsAccepted: bucketA?.sentVsAccepted,
  }).filter(([, v]) => typeof v === 'number')) // a ratio this build cannot measure is left out, not null
  const targets = overloadTargets(queueRows, bucketRows)
  return {
    title: 'Overload: a queueing server and a rate-limited one (through a proxy)',
    unit: 'acknowledged writes/s',
    latencyIs: '(a) awaited insertOne, call to acknowledgement, writes settled in the measured window; (b) acknowledged writes issued during the overload',
    adaptive: modes.adaptive === undefined ? NOT_AVAILABLE : modes.how,
    bestFixedLimit: best.limit,
    bucketRate: BUCKET_RATE,
    results: [...queueRows, ...bucketRows],
    ratios,
    targets,
    table: [queueTable(queueRows, modes.how), '', bucketTable(bucketRows), '', '| Target | Measured | Met |', '|---|---|:-:|',
      ...targets.map(t => `| ${t.target} | ${t.measured} | ${t.met ? 'yes' : '**no**'} |`)].join('\n'),
    mismatches,
    notes: [
      `(a) queue: ${CALLERS} callers each awaiting one insertOne after another, ${CALLERS / COLLECTIONS} to each of ${COLLECTIONS} collections; each row ${overloadWarmS} s unmeasured, then ${overloadRowS} s measured (writes acknowledged in the window ÷ its length); the proxy's one worker holds each write command ${SERVICE_US} µs per write, then runs it on the server and waits for its reply before the next`,
      `(b) token bucket: ${BUCKET_RATE} writes/s, burst ${BUCKET_BURST}; a command takes one token per write and passes when the bucket holds that many (it starts the overload full: the tokens it spent from that burst are taken off the writes acknowledged during the overload before dividing by its length), else it is answered 462 IngressRequestRateLimitExceeded, labels SystemOverloadedError + RetryableError, unsent; the proxy answers buildInfo as MongoDB 8.2 (the library trusts a refusal code to mean 'nothing applied' only from MongoDB: from FerretDB the same refusals are told 'unknown'). Open loop (writes issued every ${TICK_MS} ms, not waiting on each other, each with a deadline: writeTimeoutMs ${DEADLINE_MS}): ${CALM}x its rate ${overloadCalmS} s, ${OVER}x ${overloadS} s, ${CALM}x ${overloadAfterS} s; goodput = writes acknowledged during the overload, less the burst spent, ÷ its length; sent ÷ accepted = write commands reaching the proxy during the overload (the driver's own resends included) ÷ those it let through; back to full speed = from the end of the overload to the first ${WINDOW_MS} ms window (by issue time) from which on every window's writes were all acknowledged, at p90 within max(2 × the calm phase's p99, 20 ms)`,
      'every row: the documents are counted by their marker afterwards (lost = acknowledged but absent, applied twice = two copies, phantom = told not written but present); any of them, an unsettled write or an \'unknown\' outcome is printed as a MISMATCH',
      `in-flight limit: ${modes.how}`,
    ],
  }
}

if (process.argv[1] === new URL(import.meta.url).pathname) {
  const uri = process.env.MONGODB_URI ?? 'mongodb://127.0.0.1:27018/'
  const quick = process.argv.includes('--quick')
  const suite = await overloadSuite(quick ? { uri, overloadLimits: [1, 2, 4, 8, 16], overloadWarmS: 0.3, overloadRowS: 0.6, overloadCalmS: 0.6, overloadS: 2, overloadAfterS: 2, overloadSettleS: 15 } : { uri })
  console.log(suite.table)
  for (const m of suite.mismatches) console.log(`MISMATCH: ${m}`)
  console.log(suite.ratios)
}
