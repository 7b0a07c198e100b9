// What the chart shows: one bar group per suite, each bar labelled with its ratio to the
// group's baseline (the first bar, unless said otherwise).
import { apiPathGroup } from '../api-path-rows.mjs'
import { byKey } from '../by-key.mjs'
import { ratio as ratioOf } from '../stats.mjs'

const n = x => (x === null || x === undefined ? 'n/a' : x.toLocaleString('en-US'))
const x = r => `${n(r)}x`

function raw (s) {
  return {
    subtitle: 'ops/s; ratio vs insertOne sequential',
    rows: s.results.map((r, i) => ({ label: r.name, value: r.rate, text: `${n(r.rate)} ops/s · ${x(r.ratioVsSequential)}`, kind: i === 0 ? 'base' : 'other' })),
  }
}

function overhead (s) {
  return {
    subtitle: 'ops/s; WriteBuffer vs the best raw unordered bulkWrite of the same batch size',
    rows: s.comparisons.flatMap(c => [
      { label: `raw bulkWrite, batch ${n(c.batchSize)}`, value: c.bestRawRate, text: `${n(c.bestRawRate)} ops/s`, kind: 'base' },
      { label: `WriteBuffer, maxBatchSize ${n(c.batchSize)}`, value: c.bufferRate, text: `${n(c.bufferRate)} ops/s · ${x(c.ratio)} raw (overhead ${n(c.overheadPct)}%)`, kind: 'ours' },
    ]),
  }
}

function http (s) {
  const { noop, naive, buffered, fire } = byKey(s.results)
  return {
    subtitle: 'req/s, 100 connections; ratio vs naive awaited insertOne',
    rows: [
      { label: 'naive awaited insertOne', value: naive.rate, text: `${n(naive.rate)} req/s · 1x · p99 ${n(naive.p99Ms)} ms`, kind: 'base' },
      { label: 'WriteBuffer awaited insertOne', value: buffered.rate, text: `${n(buffered.rate)} req/s · ${x(s.ratios.bufferedVsNaive)} · p99 ${n(buffered.p99Ms)} ms`, kind: 'ours' },
      { label: 'fire-and-forget (not awaited)', value: fire.rate, text: `${n(fire.rate)} req/s · ${x(s.ratios.fireVsNaive)} · ${n(fire.lostWrites)} writes lost`, kind: 'other' },
      { label: 'no I/O (ceiling)', value: noop.rate, text: `${n(noop.rate)} req/s · ${x(ratioOf(noop.rate, naive.rate))}`, kind: 'other' },
    ],
  }
}

function login (s) {
  const { roOff, rwOff, roOn, rwOn } = byKey(s.results)
  const row = (label, r, base) => ({
    label,
    value: r.rate,
    text: `${n(r.rate)} req/s${base === undefined ? '' : ` · ${x(ratioOf(r.rate, base.rate))} off`} · ${n(r.findsPer1kLogins)} finds/1k`,
    kind: base === undefined ? 'base' : 'ours',
  })
  return {
    subtitle: 'req/s; cache on vs cache off of the same route',
    rows: [
      row('find + update, cache off', rwOff), row('find + update, cache on', rwOn, rwOff),
      row('read-only, cache off', roOff), row('read-only, cache on', roOn, roOff),
    ],
  }
}

function coalescing (s) {
  const { naive, buffered, refused } = byKey(s.results)
  return {
    subtitle: 'updates/s; ratio vs naive, 100 in flight',
    rows: [
      { label: 'naive awaited updateOne', value: naive.rate, text: `${n(naive.rate)} upd/s · ${n(naive.updateStatements)} DB update ops`, kind: 'base' },
      { label: 'WriteBuffer (coalesced)', value: buffered.rate, text: `${n(buffered.rate)} upd/s · ${x(s.ratios.bufferedVsNaive)} · ${n(buffered.updateStatements)} DB update ops`, kind: 'ours' },
      ...(refused === undefined ? [] : [{ label: 'WriteBuffer, merge refused (field order)', value: refused.rate, text: `${n(refused.rate)} upd/s · ${n(refused.updateStatements)} DB update ops`, kind: 'ours' }]),
    ],
  }
}

function hotPath (s) {
  return {
    subtitle: 'ns per write, no-op sink (shorter is better)',
    targetLine: 2000,
    targetLineLabel: '2 µs target',
    rows: [
      ...s.results.map(r => ({ label: r.name, value: r.nsPerOp, text: `${n(r.nsPerOp)} ns/op · ${n(r.bytesPerOp)} B/op`, kind: 'ours' })),
      { label: 'harness alone', value: s.baseline.nsPerOp, text: `${n(s.baseline.nsPerOp)} ns/op`, kind: 'base' },
    ],
  }
}

function loadCurve (s) {
  const rows = []
  for (const route of ['insert', 'login']) {
    for (const c of s.curve[route]) {
      rows.push({
        label: `${route}, ${n(c.connections)} connection${c.connections === 1 ? '' : 's'}`,
        value: c.ratio,
        text: `${x(c.ratio)} naive · p50 ${c.p50DeltaMs === null ? 'n/a' : `${c.p50DeltaMs >= 0 ? '+' : ''}${n(c.p50DeltaMs)} ms`} · idle ${n(c.bufferedIdlePct)}%`,
        kind: route === 'insert' ? 'ours' : 'other',
      })
    }
  }
  return { subtitle: 'buffered ÷ naive req/s by connections (default options); 1x line = naive', targetLine: 1, targetLineLabel: 'naive', rows }
}

function cacheScale (s) {
  const rows = []
  for (const r of s.results) {
    for (const [m, label] of [['missByIdUs', 'miss by _id'], ['missByEmailUs', 'miss by email'], ['patchWriteUs', 'patching write']]) {
      rows.push({ label: `${label}, ${n(r.pending)} pending`, value: r[m], text: `${n(r[m])} µs`, kind: r.pending === s.results[0].pending ? 'base' : 'ours' })
    }
  }
  return { subtitle: 'µs of event-loop time per operation, 10k cached entries (flat is the goal)', rows }
}

function loginDetached (s) {
  return {
    subtitle: 'req/s at 100 connections; ratio vs awaited driver calls',
    rows: s.results.map(r => {
      const label = { naive: 'awaited driver calls', buffered: `cache + detached + linger ${n(s.lingerMs)} ms`, noLinger: 'cache + detached, no linger' }[r.key]
      const vs = { buffered: s.ratios.detachedVsNaive, noLinger: s.ratios.noLingerVsNaive }[r.key]
      return { label, value: r.rate, text: `${n(r.rate)} req/s${vs === undefined ? '' : ` · ${x(vs)}`} · ${n(r.dbCommandsPer1kWrites)} upd/1k`, kind: r.key === 'naive' ? 'base' : 'ours' }
    }),
  }
}

function cacheBus (s) {
  return {
    subtitle: 'ms from B\'s acknowledged write to A\'s cache serving the new value (shorter is better)',
    rows: s.results.flatMap(r => [
      { label: `${r.name.slice(0, 40)}: p50`, value: r.p50Ms, text: `${n(r.p50Ms)} ms`, kind: 'ours' },
      { label: 'p99', value: r.p99Ms, text: `${n(r.p99Ms)} ms`, kind: 'ours' },
    ]),
  }
}

function cpuAccount (s) {
  return {
    subtitle: 'app CPU µs per request at 100 connections (shares of the app CPU); ratio vs the no-DB route',
    rows: s.results.map(r => ({
      label: `${r.name} route`,
      value: r.appUs,
      text: `${n(r.appUs)} µs · Fastify ${n(r.appPct.fastify)}% · library ${n(r.appPct.library)}% · driver ${n(r.appPct.driver)}%` +
        (r.key === 'noop' ? '' : ` · ${x(ratioOf(r.appUs, s.results[0].appUs))}`),
      kind: r.key === 'noop' ? 'base' : r.key === 'buffered' ? 'ours' : 'other',
    })),
  }
}

function apiPath (s) {
  const ours = (r, i) => apiPathGroup(r, i) === 'buffered'
  // the rows bufferedVsBestRaw compares with
  const best = Math.max(...s.results.filter((r, i) => apiPathGroup(r, i) === 'raw').map(r => r.rate))
  return {
    subtitle: 'docs/s of awaited insertOne through the buffer vs raw unordered bulkWrite (best round of each); app CPU µs per write',
    rows: s.results.map((r, i) => ({
      label: r.name.slice(0, 60),
      value: r.rate,
      text: `${n(r.rate)} docs/s · ${n(r.cpuUsPerWrite)} µs CPU` + (ours(r, i) ? ` · ${x(ratioOf(r.rate, best))} best raw` : ''),
      kind: ours(r, i) ? 'ours' : 'base',
    })),
  }
}

/** The scale suites: CPU per operation, each row against its smallest case. */
function scale (s) {
  return {
    subtitle: 'CPU µs per operation (stub Db: our code alone); ratio to the smallest case',
    rows: s.results.map(r => ({
      label: r.name.slice(0, 60),
      value: r.usPerWrite ?? (r.rate > 0 ? 1e6 / r.rate : 0),
      text: r.ratio === undefined ? `${n(r.rate)} ops/s` : `${n(r.usPerWrite)} µs · ${x(r.ratio)}`,
      kind: 'ours',
    })),
  }
}

/** Overload: (a) throughput and p50 per fixed in-flight limit, the adaptive limit as a dashed line (and its own bar); (b) goodput per row against the limiter's rate. */
function overload (s) {
  const queue = s.results.filter(r => r.part === 'queue')
  const fixed = queue.filter(r => !r.adaptive)
  const adaptive = queue.find(r => r.adaptive)
  const bucket = s.results.filter(r => r.part === 'bucket')
  const isA = t => t.target.startsWith('Overload (a)')
  const label = r => r.label.replace('the default before the adaptive limit', 'former default') // the labels' column is 300 px
  const marked = adaptive === undefined ? 'adaptive: not available in this build' : 'dashed line and last bar: adaptive'
  const perLimit = (value, text, unit) => ({
    rows: [
      ...fixed.map(r => ({ label: label(r), value: r[value], text: text(r), kind: r.limit === 4 ? 'base' : 'other' })),
      ...(adaptive === undefined ? [] : [{ label: 'adaptive', value: adaptive[value], text: text(adaptive), kind: 'ours' }]),
    ],
    ...(adaptive === undefined ? {} : { targetLine: adaptive[value], targetLineLabel: `adaptive ${n(adaptive[value])} ${unit}` }),
  })
  return [
    {
      subtitle: `(a) queue server: acknowledged writes/s per fixed in-flight limit; ${marked}`,
      ...perLimit('rate', r => `${n(r.rate)}/s · ${x(ratioOf(r.rate, Math.max(...fixed.map(f => f.rate))))} best fixed · p50 ${n(r.p50Ms)} ms`, '/s'),
      pickTargets: isA,
    },
    {
      title: `${s.title}: p50`,
      subtitle: `(a) queue server: p50 ms of acknowledged writes per fixed in-flight limit (shorter is better); ${marked}`,
      ...perLimit('p50Ms', r => `p50 ${n(r.p50Ms)} ms · p99 ${n(r.p99Ms)} ms`, 'ms'),
      pickTargets: () => false,
    },
    {
      title: `${s.title}: token bucket`,
      subtitle: `(b) token bucket: acknowledged writes/s during the 3x overload; dashed line: the limiter's rate${bucket.some(r => r.adaptive) ? '' : '; adaptive: not available in this build'}`,
      targetLine: s.bucketRate,
      targetLineLabel: `limit ${n(s.bucketRate)}/s`,
      rows: bucket.map(r => ({
        label: label(r),
        value: r.rate,
        text: `${n(r.rate)}/s · sent ÷ accepted ${n(r.sentVsAccepted)} · not-sent ${n(r.outcomes['not-sent'])} · full speed ${r.recoveryMs === null ? 'not within the run' : `${n(r.recoveryMs)} ms`} after`,
        kind: r.adaptive ? 'ours' : 'base',
      })),
      pickTargets: t => !isA(t),
    },
  ]
}

const GROUPS = { overload, scaleDispatch: scale, scaleCache: scale, cpuAccount, apiPath, raw, overhead, http, loadCurve, login, loginDetached, coalescing, cacheScale, cacheBus, hotPath }

/** A suite may draw several groups: each picks its targets (pickTargets), else the first takes them all. */
export function chartGroups (report) {
  return Object.entries(report.suites).flatMap(([key, suite]) => [GROUPS[key](suite)].flat().map(({ pickTargets, ...g }, i) => ({
    title: suite.title,
    ...g,
    targets: report.targets.filter(t => t.suite === key && (pickTargets === undefined ? i === 0 : pickTargets(t))),
  })))
}
