// Runs a command with MONGODB_URI pointing at a resolved server (see resolve-db.mjs: MONGODB_URI,
// else FWB_ENGINE=ferretdb|docdb, else whatever it finds), then stops whatever server it started.
// Usage: node scripts/with-db.mjs <cmd> [args…]
import { spawn } from 'node:child_process'
import { MongoClient } from 'mongodb'
import { ENGINE_SERVERS, resolveMongo } from './resolve-db.mjs'
import { describeServer } from './server-info.mjs'

const [cmd, ...args] = process.argv.slice(2)
if (cmd === undefined) {
  console.error('usage: node scripts/with-db.mjs <command> [args…]')
  process.exit(2)
}
const db = await resolveMongo().catch(err => {
  console.error(`[db] ${err.message}`)
  process.exit(1)
})
const client = new MongoClient(db.uri, { serverSelectionTimeoutMS: 30_000 })
const server = await describeServer(client).finally(() => client.close())
console.error(`[db] ${server.name} ${server.version} (${db.source}: ${db.uri})`)
const wanted = process.env.MONGODB_URI ? '' : process.env.FWB_ENGINE ?? ''
if (wanted !== '' && server.engine !== (ENGINE_SERVERS[wanted] ?? wanted)) {
  console.error(`[db] FWB_ENGINE=${wanted}, but that server is ${server.name}: another server on that port?`)
  await db.stop()
  process.exit(1)
}
const child = spawn(cmd, args, { stdio: 'inherit', env: { ...process.env, MONGODB_URI: db.uri } })
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => child.kill(sig))
const code = await new Promise(resolve => child.on('exit', (c, s) => resolve(c ?? (s ? 128 + 1 : 1))))
await db.stop()
process.exit(code)
