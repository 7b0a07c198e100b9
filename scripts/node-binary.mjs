// A given Node version's binary, from the npm registry (`node-<platform>-<arch>@<version>`: one
// binary, fetched with `npm pack`, so the registry's integrity check applies), unpacked once into
// $FWB_CACHE_DIR (default ~/.cache/fastify-write-buffer)/node-<version>/, never into the checkout.
// Used by the Node matrix (scripts/node-matrix.mjs) and by the bench, which measures on a
// supported Node (bench/run.mjs).
import { execFile } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'

/** The maintained lines (Node's release schedule, 2026-11): 22 and 24 LTS, 26 current. Keep in step with package.json's engines and .github/workflows/ci.yml. */
export const SUPPORTED = ['22.23.3', '24.21.0', '26.10.0']
/** The active LTS: what the bench measures on when the running Node is not supported. */
export const ACTIVE_LTS = '24.21.0'

const run = promisify(execFile)
const cacheDir = process.env.FWB_CACHE_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'fastify-write-buffer')

/** The cached binary of Node `version`, fetched from the registry the first time. */
export async function nodeBinary (version) {
  const dir = join(cacheDir, `node-${version}`)
  const bin = join(dir, 'bin', process.platform === 'win32' ? 'node.exe' : 'node')
  if (existsSync(bin)) return bin
  const pkg = `node-${process.platform === 'win32' ? 'win' : process.platform}-${process.arch}@${version}`
  mkdirSync(cacheDir, { recursive: true })
  const scratch = mkdtempSync(join(cacheDir, '.fetch-'))
  try {
    console.error(`fetching ${pkg} into ${dir}`)
    await run('npm', ['pack', pkg, '--pack-destination', scratch, '--loglevel', 'warn'], { cwd: scratch, shell: process.platform === 'win32' })
    const tgz = readdirSync(scratch).find(f => f.endsWith('.tgz'))
    if (tgz === undefined) throw new Error(`npm pack ${pkg} wrote no tarball`)
    await run('tar', ['-xzf', tgz], { cwd: scratch })
    renameSync(join(scratch, 'package'), dir) // whole or not at all: a half-fetched copy is never found
  } finally {
    rmSync(scratch, { recursive: true, force: true })
  }
  return bin
}
