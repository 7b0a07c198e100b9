// The supported Node versions, here: the package check and the unit tests under each of them.
//
//   node scripts/node-matrix.mjs                  every version below: pack once, then per version
//                                                 check-package (on that tarball) + unit tests
//   node scripts/node-matrix.mjs --unit           unit tests only (no pack, no package check)
//   node scripts/node-matrix.mjs 24.21.0 …        other versions (exact, as the registry has them)
//
// Node itself comes from the npm registry (scripts/node-binary.mjs: `node-<platform>-<arch>@<version>`, one binary,
// fetched with `npm pack`, so the registry's integrity check applies), unpacked once into
// $FWB_CACHE_DIR (default ~/.cache/fastify-write-buffer)/node-<version>/, never into the
// checkout. Each run puts that binary first on PATH, so whatever it starts (npm's scripts,
// vitest's workers) runs on it too. The tarball is packed once, by the lowest version (the
// build runs on the floor of the range); the checks are about the package as it runs, which
// is the same tarball on every version. Exits non-zero when anything failed, after a summary.
import { spawn } from 'node:child_process'
import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { delimiter, dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { stripVTControlCharacters } from 'node:util'
import { nodeBinary, SUPPORTED as VERSIONS } from './node-binary.mjs'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const args = process.argv.slice(2)
const unitOnly = args.includes('--unit')
const versions = args.filter(a => !a.startsWith('--'))
for (const v of versions) if (!/^\d+\.\d+\.\d+$/.test(v)) throw new Error(`not an exact version: ${v}`)
if (versions.length === 0) versions.push(...VERSIONS)

/** Runs `file args` with `node` first on PATH; resolves { ok, ms, tail } (its output's last lines). */
function step (node, file, argv, env = {}) {
  const t0 = performance.now()
  return new Promise(resolve => {
    const child = spawn(file, argv, {
      cwd: root,
      env: { ...process.env, ...env, PATH: `${dirname(node)}${delimiter}${process.env.PATH}`, NO_COLOR: '1', FORCE_COLOR: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let out = ''
    child.stdout.on('data', d => { out += d })
    child.stderr.on('data', d => { out += d })
    child.on('close', code => {
      resolve({ ok: code === 0, ms: performance.now() - t0, out: stripVTControlCharacters(out) })
    })
  })
}

const lastLines = (text, n) => text.trimEnd().split('\n').slice(-n).map(l => `    ${l}`).join('\n')
const seconds = ms => `${(ms / 1000).toFixed(1)} s`

const started = performance.now()
const nodes = []
for (const version of versions) nodes.push({ version, bin: await nodeBinary(version) })

let tarball
let scratch
const results = []
if (!unitOnly) {
  scratch = mkdtempSync(join(tmpdir(), 'fastify-write-buffer-matrix-'))
  const packer = nodes[0]
  const packed = await step(packer.bin, 'npm', ['pack', '--pack-destination', scratch, '--loglevel', 'warn'])
  tarball = readdirSync(scratch).map(f => join(scratch, f)).find(f => f.endsWith('.tgz'))
  console.log(`${packed.ok ? 'ok  ' : 'FAIL'} npm pack on Node ${packer.version} (the build) (${seconds(packed.ms)})`)
  if (!packed.ok || tarball === undefined) {
    console.log(lastLines(packed.out, 30))
    process.exit(1)
  }
}

for (const { version, bin } of nodes) {
  const actual = (await step(bin, bin, ['--version'])).out.trim()
  if (actual !== `v${version}`) throw new Error(`${bin} says ${actual}, not v${version}`)
  const row = { version }
  if (!unitOnly) {
    row.pack = await step(bin, bin, ['scripts/check-package.mjs', '--tarball', tarball])
    console.log(`${row.pack.ok ? 'ok  ' : 'FAIL'} Node ${version}: package check (${seconds(row.pack.ms)})`)
    if (!row.pack.ok) console.log(lastLines(row.pack.out, 30))
  }
  row.unit = await step(bin, bin, [join('node_modules', 'vitest', 'vitest.mjs'), 'run', '--project', 'unit'])
  const tests = /^\s*Tests\s+(.*)$/m.exec(row.unit.out)?.[1]?.trim() ?? ''
  console.log(`${row.unit.ok ? 'ok  ' : 'FAIL'} Node ${version}: unit tests ${tests} (${seconds(row.unit.ms)})`)
  if (!row.unit.ok) console.log(lastLines(row.unit.out, 40))
  results.push(row)
}
if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true })

console.log(`\nNode matrix (${seconds(performance.now() - started)}):`)
for (const r of results) {
  const cells = [r.pack === undefined ? null : `package check ${r.pack.ok ? 'ok' : 'FAIL'}`, `unit ${r.unit.ok ? 'ok' : 'FAIL'}`].filter(Boolean)
  console.log(`  ${r.version.padEnd(8)} ${cells.join(', ')}`)
}
if (results.some(r => !r.unit.ok || r.pack?.ok === false)) process.exit(1)
