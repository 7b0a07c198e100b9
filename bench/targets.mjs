// The issue's targets, checked against this run's ratios, each with the numbers that explain it.
import { apiPathGroup } from './api-path-rows.mjs'
import { byKey } from './by-key.mjs'
import { ratio } from './stats.mjs'

const fmt = (x, unit = '') => (x === null || x === undefined ? 'n/a' : `${x.toLocaleString('en-US')}${unit}`)

function curveTargets (loadCurve) {
  const at = c => loadCurve.curve.insert.find(p => p.connections === c)
  const row = c => loadCurve.results.find(r => r.key === `insert-buffered-${c}`)
  const fmtPoint = c => `${fmt(at(c)?.ratio, 'x')} @${c}`
  const floors = { 1: 0.95, 10: 1.5, 100: 5, 400: 8 }
  const peakOk = loadCurve.results.filter(r => r.variant === 'buffered').every(r => r.peakConnections <= loadCurve.maxInFlight + 1)
  return [
    {
      suite: 'loadCurve',
      target: 'Insert route, buffered ÷ naive: ≥ 0.95x @1 (p50 within 0.5 ms), ≥ 1.5x @10, ≥ 5x @100, ≥ 8x @400',
      measured: Object.keys(floors).map(Number).map(fmtPoint).join(', ') + `; p50 delta @1 ${fmt(at(1)?.p50DeltaMs, ' ms')}`,
      met: Object.entries(floors).every(([c, floor]) => (at(Number(c))?.ratio ?? 0) >= floor) && Math.abs(at(1)?.p50DeltaMs ?? Infinity) <= 0.5,
      notes: `CPU ceiling of the buffered route ÷ naive (the best ratio this machine's cores allow): ${[100, 400].map(c => `${fmt(at(c)?.ceilingVsNaive, 'x')} @${c}`).join(', ')}; ` +
        `login route: ${loadCurve.curve.login.map(p => `${fmt(p.ratio, 'x')} @${p.connections}`).join(', ')}`,
    },
    {
      suite: 'loadCurve',
      target: 'Machine idle ≤ 10% at 100 and 400 connections (insert route, buffered)',
      measured: [100, 400].map(c => `${fmt(row(c)?.idlePct, '%')} @${c}`).join(', '),
      met: [100, 400].every(c => (row(c)?.idlePct ?? 100) <= 10),
      notes: `app CPU per request ${[1, 10, 100, 400].map(c => `${fmt(row(c)?.appCpuUsPerReq, ' µs')} @${c}`).join(', ')}`,
    },
    {
      suite: 'loadCurve',
      target: 'Peak server connections of the buffered routes ≤ maxInFlight + 1',
      measured: loadCurve.results.filter(r => r.variant === 'buffered').map(r => `${r.route} ${r.peakConnections} @${r.connections}`).join(', '),
      met: peakOk,
      notes: `maxInFlight ${loadCurve.maxInFlight} (default)`,
    },
  ]
}

function apiPathTargets (apiPath) {
  const buffered = apiPath.results.filter((r, i) => apiPathGroup(r, i) === 'buffered')
  const fastest = buffered.length === 0 ? undefined : buffered.reduce((a, b) => (b.rate > a.rate ? b : a))
  return [{
    suite: 'apiPath',
    target: 'API path: awaited insertOne ≥ 95% of raw bulkWrite docs/s (best of 1/2/4 in flight, the buffer with as many writes outstanding); app CPU per write ≤ 1.15x raw',
    measured: `${fmt(apiPath.ratios.bufferedVsBestRaw, 'x')} docs/s, CPU per write ${fmt(apiPath.ratios.cpuPerWriteVsLeanestRaw, 'x')} (${fmt(fastest?.cpuUsPerWrite, ' µs')}), ${fastest?.name ?? 'no buffered row'}; 1,000 callers (the issue's setup): ${fmt(apiPath.ratios.callers1000VsBestRaw, 'x')} of the best raw, ${fmt(apiPath.ratios.bufferedVsBestRawSameOutstanding, 'x')} of the best raw way with 1,000 writes outstanding`,
    met: (apiPath.ratios.bufferedVsBestRaw ?? 0) >= 0.95 && (apiPath.ratios.cpuPerWriteVsLeanestRaw ?? Infinity) <= 1.15,
    notes: apiPath.notes[1],
  }]
}

/** Issue 26's load curve and CPU account (the account's "or": our own share ≤ 6 µs, floors printed beside). */
function physicalLimitTargets (loadCurve, cpuAccount) {
  const out = []
  if (loadCurve !== undefined) {
    const at = c => loadCurve.curve.insert.find(p => p.connections === c)
    const floors = { 1: 1.0, 10: 1.6, 100: 8, 400: 9 }
    out.push({
      suite: 'loadCurve',
      target: 'Physical limit: insert route, buffered ÷ naive ≥ 1.0x @1 (p50 equal), ≥ 1.6x @10, ≥ 8x @100, ≥ 9x @400',
      measured: Object.keys(floors).map(c => `${fmt(at(Number(c))?.ratio, 'x')} @${c}`).join(', ') + `; p50 delta @1 ${fmt(at(1)?.p50DeltaMs, ' ms')}`,
      met: Object.entries(floors).every(([c, floor]) => (at(Number(c))?.ratio ?? 0) >= floor) && (at(1)?.p50DeltaMs ?? Infinity) <= 0,
      notes: `CPU ceiling of the buffered route ÷ naive (cores ÷ its measured CPU per request, no idle): ${[100, 400].map(c => `${fmt(at(c)?.ceilingVsNaive, 'x')} @${c}`).join(', ')}`,
    })
  }
  if (cpuAccount !== undefined) {
    const { noop, buffered } = byKey(cpuAccount.results)
    const r = cpuAccount.ratios
    const p99Ok = buffered.p99Ms <= 2 * noop.p99Ms
    out.push({
      suite: 'cpuAccount',
      target: 'Physical limit: buffered ≥ 0.65x the no-DB route at 100 connections with p99 ≤ 2x its p99, or this library + the driver ≤ 6 µs per request',
      measured: `${fmt(r.bufferedVsNoDb, 'x')}, p99 ${fmt(buffered.p99Ms, ' ms')} vs ${fmt(noop.p99Ms, ' ms')}; library + driver ${fmt(r.bufferedLibraryPlusDriverUs, ' µs')}`,
      met: ((r.bufferedVsNoDb ?? 0) >= 0.65 && p99Ok) || (r.bufferedLibraryPlusDriverUs ?? Infinity) <= 6,
      notes: `the driver alone at this load's batch size (${fmt(buffered.avgBatch)} writes): bulkWrite ${fmt(r.driverFloorBulkWriteUs, ' µs')}, insert command ${fmt(r.driverFloorInsertCommandUs, ' µs')} per write; this library + the cheapest: ${fmt(r.libraryPlusCheapestDriverUs, ' µs')}; ` +
        `this machine's bound at 100 connections (no-DB app + cheapest driver + server + load generator, no idle): ${fmt(r.boundVsNoDb, 'x')} the no-DB route, ${fmt(r.boundVsNaive, 'x')} naive (${fmt(r.boundWithoutDriverVsNaive, 'x')} with a free driver too); ` +
        `the same route over an in-process server with its round trip (${fmt(r.inProcessRoundTripMs, ' ms')}, came out ${fmt(r.inProcessAchievedRoundTripMs, ' ms')}) and no CPU: ${fmt(r.inProcessVsNoDb, 'x')} the no-DB route, the buffer adding ${fmt(r.bufferInRouteUs, ' µs')} of app CPU per request and the driver ${fmt(r.driverInRouteUs, ' µs')} more; ` +
        `a handler that waits the same way with no library (one batch out, the same round trip, no CPU per write): ${fmt(r.gateVsNoDb, 'x')} the no-DB route, the ceiling of any such batcher here (the buffered route reached ${fmt(r.bufferedVsGate, 'x')} of it; with two batches out and the same round trip ${fmt(r.gate2VsNoDb, 'x')}); over it this library adds ${fmt(r.libraryOverGateUs, ' µs')} per request, and with the driver ${fmt(r.libraryPlusDriverOverGateUs, ' µs')} (whole-process CPU, no profile)`,
    })
  }
  return out
}

/** Issue 24's flat costs, from the two scale suites (stub Db: our code alone). */
function flatCostTargets (scaleDispatch, scaleCache) {
  const out = []
  if (scaleDispatch !== undefined) {
    const r = scaleDispatch.ratios
    const rows = scaleDispatch.results
    const tenK = rows.find(x => x.name === '10000 collections')
    const stub = rows.find(x => x.name.startsWith('stub alone'))
    out.push({
      suite: 'scaleDispatch',
      target: 'Flat costs: 10,000 collections ≤ 1.5x the per-write CPU of 1; 4,000 callers of one document ≤ 1.5x 100; creating 10,000 collections ≤ 50 ms',
      measured: `${fmt(r.collections10kVs1, 'x')}; ${fmt(r.callers4000Vs100, 'x')}; ${fmt(tenK?.createMs, ' ms')}`,
      met: (r.collections10kVs1 ?? Infinity) <= 1.5 && (r.callers4000Vs100 ?? Infinity) <= 1.5 && (tenK?.createMs ?? Infinity) <= 50,
      notes: `at 10,000 collections each batch holds one write: the stub's own call per batch is ${fmt(stub?.ratio, 'x')} a whole write at 1 collection (${fmt(stub?.usPerWrite, ' µs')}), ` +
        `so 1.5x would leave no time for the batch itself; without the stub's share ${fmt(r.collections10kVs1WithoutStub, 'x')}; same batches over 10,000 collections ÷ 100: ${fmt(r.collections10kVs100SameBatches, 'x')}`,
    })
  }
  if (scaleCache !== undefined) {
    const r = scaleCache.ratios
    const reads = [r.readHit40kPendingVs0, r.readMissById40kPendingVs0, r.readMissByEmail40kPendingVs0, r.readNotFound40kPendingVs0]
    out.push({
      suite: 'scaleCache',
      target: 'Flat costs: a cached findOne at 40,000 pending writes ≤ 2x at none; writes with reads mixed in ≤ 1.5x alone at 40,000-write waves; writes beside 10,000 cached misses ≤ 1.3x',
      measured: `reads ${reads.map(v => fmt(v, 'x')).join(' / ')}; mixed ${fmt(r.mixedVsAlone40kWave, 'x')}; misses ${fmt(r.update10kMissesVs0, 'x')} / ${fmt(r.insert10kMissesVs0, 'x')}`,
      met: reads.every(v => (v ?? Infinity) <= 2) && (r.mixedVsAlone40kWave ?? Infinity) <= 1.5 && (r.update10kMissesVs0 ?? Infinity) <= 1.3 && (r.insert10kMissesVs0 ?? Infinity) <= 1.3,
      notes: `reads: hit / miss by _id / miss by email / not found; misses: update by _id / insert; mixed at 1,000-write waves ${fmt(r.mixedVsAlone1kWave, 'x')} (the reads' own cost, not growth)`,
    })
    if (r.writeOnlyCacheOnVsOff !== undefined) {
      const row = scaleCache.results.find(x => x.key === 'write-only')
      out.push({
        suite: 'scaleCache',
        target: 'Read cache on: inserts into a collection no read has asked about (events beside cached users) ≤ 1.25x their CPU with the cache off',
        measured: fmt(r.writeOnlyCacheOnVsOff, 'x'),
        met: r.writeOnlyCacheOnVsOff <= 1.25,
        notes: row?.details ?? '',
      })
    }
  }
  return out
}

/** The targets of a run of some of the suites (--suites): those its suites evaluate themselves (overload). */
export function suiteTargets (suites) {
  return Object.values(suites).flatMap(s => s.targets ?? [])
}

/** Whether `suites` holds every suite evaluateTargets reads unconditionally. */
export const allTargetSuites = suites => ['http', 'overhead', 'login', 'coalescing', 'hotPath'].every(k => k in suites)

export function evaluateTargets ({ http, overhead, login, coalescing, hotPath, loadCurve, cacheScale, loginDetached, cacheBus, apiPath, cpuAccount, scaleDispatch, scaleCache, overload }) {
  const { noop, naive, buffered, fire } = byKey(http.results)
  const p99Ratio = http.ratios.bufferedP99VsNaive
  const worstOverhead = overhead.comparisons.reduce((a, b) => (b.overheadPct > a.overheadPct ? b : a))
  const { roOff, rwOff, roOn, rwOn } = byKey(login.results)
  const { naive: uncoalesced, buffered: coalesced, refused } = byKey(coalescing.results)
  const slowest = hotPath.results.reduce((a, b) => (b.nsPerOp > a.nsPerOp ? b : a))
  return [
    ...(loadCurve === undefined ? [] : curveTargets(loadCurve)),
    ...physicalLimitTargets(loadCurve, cpuAccount),
    ...(apiPath === undefined ? [] : apiPathTargets(apiPath)),
    ...flatCostTargets(scaleDispatch, scaleCache),
    // evaluated by the suite itself (its table prints them beside its rows)
    ...(overload?.targets ?? []),
    ...(cacheBus === undefined
      ? []
      : [{
          suite: 'cacheBus',
          target: 'Cache bus: B\'s acknowledged write served by A\'s cache within 20 ms at p99',
          measured: `p99 ${fmt(cacheBus.results[0]?.p99Ms, ' ms')} over ${fmt(cacheBus.results[0]?.trials)} trials`,
          met: (cacheBus.results[0]?.p99Ms ?? Infinity) <= 20,
          notes: `p50 ${fmt(cacheBus.results[0]?.p50Ms, ' ms')}; Redis alone p99 ${fmt(cacheBus.results[1]?.p99Ms, ' ms')}`,
        }]),
    ...(loginDetached === undefined
      ? []
      : [{
          suite: 'loginDetached',
          target: 'Login with cache + detached + linger ≥ 5x the same route with awaited driver calls (100 connections)',
          measured: fmt(loginDetached.ratios.detachedVsNaive, 'x'),
          met: (loginDetached.ratios.detachedVsNaive ?? 0) >= 5,
          notes: `update statements per 1k logins: ${loginDetached.results.map(r => `${r.key} ${fmt(r.dbCommandsPer1kWrites)}`).join(', ')}`,
        }]),
    ...(cacheScale === undefined
      ? []
      : [{
          suite: 'cacheScale',
          target: 'Cache miss / write cost flat from 1k to 50k pending writes (50k ÷ 1k ≤ 1.5)',
          measured: Object.entries(cacheScale.ratios).map(([k, v]) => `${k} ${fmt(v, 'x')}`).join(', '),
          met: Object.values(cacheScale.ratios).every(v => v !== null && v <= 1.5),
          notes: cacheScale.notes[1],
        }]),
    {
      suite: 'http',
      target: 'HTTP: WriteBuffer ≥ 8x naive req/s, p99 ≤ 2x naive',
      measured: `${fmt(http.ratios.bufferedVsNaive, 'x')} req/s, p99 ${fmt(p99Ratio, 'x')}`,
      met: http.ratios.bufferedVsNaive >= 8 && p99Ratio !== null && p99Ratio <= 2,
      notes: `naive ${fmt(naive.rate)} req/s (${fmt(naive.dbCommandsPer1kWrites)} inserts/1k req); WriteBuffer ${fmt(buffered.rate)} req/s ` +
        `(${fmt(buffered.dbCommandsPer1kWrites)} inserts/1k req, avg batch ${fmt(buffered.avgBatch)}); ` +
        `fire-and-forget ${fmt(fire.rate)} req/s; the no-I/O ceiling of this process is ${fmt(ratio(noop.rate, naive.rate), 'x')} naive ` +
        `(${fmt(noop.rate)} req/s: app, load generator and DB share the cores), so WriteBuffer ran at ${fmt(http.ratios.bufferedVsCeiling, 'x')} of it`,
    },
    {
      suite: 'overhead',
      target: 'Buffer overhead ≤ 10% of raw bulkWrite',
      measured: overhead.comparisons.map(c => `${fmt(c.overheadPct, '%')} @${c.batchSize}`).join(', '),
      met: worstOverhead.overheadPct <= 10,
      notes: `worst at maxBatchSize ${worstOverhead.batchSize}: buffer ${fmt(worstOverhead.bufferRate)} vs ${fmt(worstOverhead.bestRawRate)} ops/s (${worstOverhead.bestRaw}); ` +
        `buffer avg batch ${fmt(worstOverhead.bufferAvgBatch)}; negative = buffer faster`,
    },
    {
      suite: 'login',
      target: 'Cache on ≥ 5x cache off (login with update)',
      measured: fmt(login.ratios.cacheOnVsOffWithUpdate, 'x'),
      met: login.ratios.cacheOnVsOffWithUpdate >= 5,
      notes: `write-bound: each login awaits its update; with the cache on it ran at ${fmt(rwOn.rate)} req/s (${fmt(rwOn.updateStatementsPerS)} update statements/s reached the server) ` +
        `vs ${fmt(roOn.rate)} req/s read-only; off: ${fmt(rwOff.rate)} req/s`,
    },
    {
      suite: 'login',
      target: 'Cache on ≥ 5x cache off (read-only login)',
      measured: fmt(login.ratios.cacheOnVsOffReadOnly, 'x'),
      met: login.ratios.cacheOnVsOffReadOnly >= 5,
      notes: `${fmt(roOff.rate)} → ${fmt(roOn.rate)} req/s; finds per 1k logins ${fmt(roOff.findsPer1kLogins)} → ${fmt(roOn.findsPer1kLogins)}`,
    },
    {
      suite: 'login',
      target: '≤ 1 DB read per user per TTL (cache on)',
      measured: `max ${rwOn.maxFindsForOneUser} find(s) for one user, avg ${fmt(rwOn.findsPerUser)}`,
      met: rwOn.maxFindsForOneUser <= 1 && rwOn.appAgeS * 1000 <= login.cacheTtlMs,
      notes: `counted over the cache-on app's life (warm-up + both runs, ${fmt(rwOn.appAgeS)} s, within one ${login.cacheTtlMs / 1000} s TTL); ` +
        `finds per 1k logins in the timed runs: read-only ${fmt(roOn.findsPer1kLogins)}, with update ${fmt(rwOn.findsPer1kLogins)}`,
    },
    {
      suite: 'coalescing',
      target: '≤ 10 DB update ops for 1,000 coalescable updates',
      measured: `${coalesced.updateStatements} update statements in ${coalesced.updateCommands} command(s)`,
      met: coalesced.updateStatements <= 10,
      notes: `naive sends ${uncoalesced.updateStatements}; buffered throughput ${fmt(coalescing.ratios.bufferedVsNaive, 'x')} naive; counts correct: ${coalesced.countsCorrect}, last write wins: ${coalesced.lastWriteWins}` +
        (refused === undefined ? '' : `; with a $set field sorting before the $inc one the merge is refused (field order): ${refused.updateStatements} statements, counts correct: ${refused.countsCorrect}`),
    },
    {
      suite: 'hotPath',
      target: 'Hot path ≤ 2 µs/op',
      measured: hotPath.results.map(r => `${r.kind} ${fmt(r.nsPerOp / 1000, ' µs')}`).join(', '),
      met: slowest.nsPerOp <= 2000,
      notes: `harness alone ${fmt(hotPath.baseline.nsPerOp)} ns/op; allocations ${hotPath.results.map(r => `${r.kind} ${fmt(r.bytesPerOp, ' B')}`).join(', ')} per op`,
    },
    {
      suite: 'hotPath',
      target: 'Hot path no more than 5% slower than before (baseline commit)',
      measured: hotPath.results.map(r => `${r.kind} ${fmt(r.costVsBefore, 'x')}`).join(', '),
      met: hotPath.results.every(r => r.costVsBefore !== null && r.costVsBefore <= 1.05),
      notes: hotPath.notes[1],
    },
    {
      suite: 'hotPath',
      target: 'Tracing free when unused: @opentelemetry/api installed, no SDK registered, ≤ 3% over the package absent',
      measured: hotPath.results.map(r => `${r.kind} ${fmt(r.tracingCost, 'x')}`).join(', '),
      met: hotPath.results.every(r => r.tracingCost !== null && r.tracingCost !== undefined && r.tracingCost <= 1.03),
      notes: hotPath.notes[2],
    },
  ]
}
