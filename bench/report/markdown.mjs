// The run as Markdown: machine, one table per suite, then the targets.
const num = x => (x === null || x === undefined ? '—' : x.toLocaleString('en-US'))
const cell = s => String(s).replaceAll('|', '\\|')

/** Per-suite extra facts worth a column. */
const EXTRA = {
  raw: r => `${num(r.ratioVsSequential)}x sequential`,
  overhead: r => `avg batch ${num(r.avgBatch)}`,
  http: r => [
    `2xx ${num(r.ok2xx)}, non-2xx ${num(r.non2xx)}, errors ${num(r.errors)}`,
    r.docsMatchAcked === undefined ? null : `docs ${num(r.docsInDb)} ${r.docsMatchAcked ? '=' : '≠'} ${num(r.serverAcked)} answered${r.docsMatchAcked ? ' ✓' : ' ✗ MISMATCH'}`,
    r.lostWrites === undefined ? null : `backlog at end ${num(r.backlogAtEnd)}, lost ${num(r.lostWrites)} of ${num(r.serverAcked)}`,
  ].filter(Boolean).join('; '),
  loadCurve: r => `CPU µs/req: app ${num(r.appCpuUsPerReq)}, server ${num(r.serverCpuUsPerReq)}, load generator ${num(r.loadGenCpuUsPerReq)} → ceiling ${num(r.cpuCeilingReqS)} req/s; machine idle ${num(r.idlePct)}%, peak connections ${num(r.peakConnections)}` +
    (r.non2xx + r.errors > 0 ? `; non-2xx ${num(r.non2xx)}, errors ${num(r.errors)}` : ''),
  cacheScale: r => `miss by _id ${num(r.missByIdUs)} µs, miss by email ${num(r.missByEmailUs)} µs, hit ${num(r.hitUs)} µs, patching write ${num(r.patchWriteUs)} µs, write by email ${num(r.fieldWriteUs)} µs`,
  loginDetached: r => `update statements per 1k logins ${num(r.dbCommandsPer1kWrites)}; non-2xx ${num(r.non2xx)}`,
  cacheBus: r => `p90 ${num(r.p90Ms)} ms, max ${num(r.maxMs)} ms over ${num(r.trials)} trials`,
  login: r => `finds/1k logins ${num(r.findsPer1kLogins)}, finds/user ${num(r.findsPerUser)} (max ${num(r.maxFindsForOneUser)}), update stmts/s ${num(r.updateStatementsPerS)}`,
  coalescing: r => `${r.fields}: ${num(r.updateStatements)} update stmts in ${num(r.updateCommands)} cmds; counts ${r.countsCorrect ? 'ok' : 'WRONG'}; last write wins ${r.lastWriteWins ? 'yes' : 'no'}`,
  apiPath: r => `app CPU ${num(r.cpuUsPerWrite)} µs/write`,
  cpuAccount: r => `app CPU ${num(r.appUs)} µs/req: Fastify ${num(r.appPct.fastify)}%, library ${num(r.appPct.library)}%, driver ${num(r.appPct.driver)}%, GC (main) ${num(r.appPct.gc)}%; server ${num(r.us.server)} µs/req; rows sum to ${num(r.sumVsWallCpu)}x cores × s`,
  scaleDispatch: r => `${num(r.usPerWrite)} µs/write, ${num(r.ratio)}x the smallest case` + (r.createMs === undefined ? '' : `; first writes to every collection ${num(r.createMs)} ms`),
  scaleCache: r => r.details,
  overload: r => r.details,
  hotPath: r => `${num(r.nsPerOp)} ns/op (${num(r.nsPerOpOverBaseline)} over harness), ${num(r.bytesPerOp)} B/op` +
    (r.costVsBefore === null ? '' : `; before ${num(r.nsPerOpBefore)} ns/op → ${num(r.costVsBefore)}x the cost`) +
    (r.tracingCost == null ? '' : `; without @opentelemetry/api ${num(r.nsPerOpWithoutOtel)} ns/op → tracing costs ${num(r.tracingCost)}x`),
}

function suiteTable (key, suite) {
  const lines = [
    `### ${suite.title}`,
    '',
    `| Measurement | ${suite.unit} | p50 ms | p99 ms | DB cmds / 1k writes | Details |`,
    '|---|--:|--:|--:|--:|---|',
    ...suite.results.map(r => `| ${cell(r.name)} | ${num(r.rate)} | ${num(r.p50Ms)} | ${num(r.p99Ms)} | ${num(r.dbCommandsPer1kWrites)} | ${cell(EXTRA[key](r))} |`),
    '',
    `Ratios: ${Object.entries(suite.ratios).map(([k, v]) => `${k} ${num(v)}`).join(', ')}. Latency: ${suite.latencyIs}.`,
  ]
  if (suite.table !== undefined) lines.push('', suite.table) // a suite's own table (cpuAccount: rows = components)
  for (const m of suite.mismatches ?? []) lines.push('', `**MISMATCH: ${m}**`)
  for (const n of suite.notes) lines.push('', `- ${n}`)
  return lines.join('\n')
}

export function markdown (report) {
  const m = report.machine
  return [
    `## fastify-write-buffer bench (${report.mode} mode, ${(report.durationMs / 1000).toFixed(0)} s)`,
    '',
    `${m.cpus} × ${m.cpuModel}, ${m.os}, load average ${m.loadAvg1mAtStart} at start, Node ${m.node}; server: ${m.server.source} ${m.server.version} (reports MongoDB ${m.server.reportsMongoVersion}).`,
    'Ratios compare measurements of this one run; absolute numbers depend on this machine.',
    '',
    ...Object.entries(report.suites).flatMap(([key, suite]) => [suiteTable(key, suite), '']),
    '### Targets',
    '',
    '| Target | Measured | Met | Notes |',
    '|---|---|:-:|---|',
    ...report.targets.map(t => `| ${cell(t.target)} | ${cell(t.measured)} | ${t.met ? 'yes' : '**no**'} | ${cell(t.notes)} |`),
    '',
  ].join('\n')
}
