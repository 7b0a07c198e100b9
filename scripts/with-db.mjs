// Runs a command with MONGODB_URI pointing at a resolved server (see resolve-db.mjs),
// then stops whatever server it started.  Usage: node scripts/with-db.mjs <cmd> [args…]
import { spawn } from 'node:child_process'
import { resolveMongo } from './resolve-db.mjs'

const [cmd, ...args] = process.argv.slice(2)
if (cmd === undefined) {
  console.error('usage: node scripts/with-db.mjs <command> [args…]')
  process.exit(2)
}
const db = await resolveMongo()
console.error(`[db] ${db.source}: ${db.uri}`)
const child = spawn(cmd, args, { stdio: 'inherit', env: { ...process.env, MONGODB_URI: db.uri } })
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => child.kill(sig))
const code = await new Promise(resolve => child.on('exit', (c, s) => resolve(c ?? (s ? 128 + 1 : 1))))
await db.stop()
process.exit(code)
