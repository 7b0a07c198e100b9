// Builds an earlier commit of this repository (the "before" of a before/after comparison)
// into .scratch/baseline-<ref>/ with a detached git worktree and its own dependencies (as
// its lock file pins them: `npm ci`, once). Returns the path of its dist/index.js, or null
// with a reason.
import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

const run = promisify(execFile)
const root = fileURLToPath(new URL('..', import.meta.url))

export async function buildBaseline (ref) {
  try {
    const { stdout } = await run('git', ['rev-parse', '--short', `${ref}^{commit}`], { cwd: root })
    const commit = stdout.trim()
    const dir = `${root}.scratch/baseline-${commit}`
    const entry = `${dir}/dist/index.js`
    if (!existsSync(entry)) {
      if (!existsSync(dir)) await run('git', ['worktree', 'add', '--detach', dir, commit], { cwd: root })
      if (!existsSync(`${dir}/node_modules`)) {
        await run('npm', ['ci', '--ignore-scripts', '--no-audit', '--no-fund'], { cwd: dir, timeout: 300_000, maxBuffer: 16 << 20 })
      }
      // its own build: scripts/build.mjs where it has one (it also copies the .cjs files tsc leaves out)
      if (existsSync(`${dir}/scripts/build.mjs`)) await run(process.execPath, ['scripts/build.mjs'], { cwd: dir })
      else await run(process.execPath, [`${dir}/node_modules/typescript/bin/tsc`, '-p', 'tsconfig.build.json'], { cwd: dir })
    }
    return { commit, entry }
  } catch (err) {
    return { commit: null, entry: null, reason: String(err.message ?? err).split('\n')[0] }
  }
}
