// Renders bench/results/latest.json again as Markdown (stdout) and latest.svg, without measuring.
// Usage: node bench/render.mjs [--out <dir>]
import { readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { chartGroups } from './report/chart-groups.mjs'
import { markdown } from './report/markdown.mjs'
import { svg } from './report/svg.mjs'
import { allTargetSuites, evaluateTargets, suiteTargets } from './targets.mjs'

const { values: args } = parseArgs({ options: { out: { type: 'string', default: fileURLToPath(new URL('./results', import.meta.url)) } } })
const report = JSON.parse(await readFile(join(args.out, 'latest.json'), 'utf8'))
report.targets = allTargetSuites(report.suites) ? evaluateTargets(report.suites) : suiteTargets(report.suites) // a run of some suites (--suites)
const heading = `fastify-write-buffer bench · ${report.mode} · ${report.startedAt.slice(0, 16).replace('T', ' ')} UTC · ` +
  `${report.machine.cpus} cores · Node ${report.machine.node} · ${report.machine.server.source} ${report.machine.server.version}`
await writeFile(join(args.out, 'latest.json'), JSON.stringify(report, null, 2) + '\n')
await writeFile(join(args.out, 'latest.svg'), svg(chartGroups(report), heading))
process.stdout.write(markdown(report))
