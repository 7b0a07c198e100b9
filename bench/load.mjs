// Runs bench/load-worker.mjs (autocannon) against a URL and returns its summary.
import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { withProgress } from './progress.mjs'

const run = promisify(execFile)
const worker = fileURLToPath(new URL('./load-worker.mjs', import.meta.url))

export async function load (label, cfg) {
  const { stdout } = await withProgress(label, () => run(process.execPath, [worker, JSON.stringify({ connections: 100, ...cfg })], { timeout: (cfg.durationS + 60) * 1000 }), cfg.durationS * 1000)
  return JSON.parse(stdout)
}
