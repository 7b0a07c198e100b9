// Runs a command against a real MongoDB replica set: starts one with mongodb-memory-server's
// MongoMemoryReplSet (it downloads a mongod binary on first use, cached in
// ~/.cache/mongodb-binaries), sets MONGODB_URI to it, runs the command, stops the set.
//   node scripts/with-replset.mjs npm test        (the CI workflow's replica-set job)
// One member: a replica set all the same (retryable writes, txnNumbers, a primary), and a
// single host, so the fault tests' proxy (one host, directConnection) can stand in front of it.
import { spawn } from 'node:child_process'
import { MongoMemoryReplSet } from 'mongodb-memory-server'

const [cmd, ...args] = process.argv.slice(2)
if (cmd === undefined) {
  console.error('usage: node scripts/with-replset.mjs <command> [args…]')
  process.exit(2)
}
const replSet = await MongoMemoryReplSet.create({ replSet: { count: 1, storageEngine: 'wiredTiger' } })
await replSet.waitUntilRunning()
const uri = replSet.getUri()
console.error(`[db] replica set (mongodb-memory-server): ${uri}`)
const child = spawn(cmd, args, { stdio: 'inherit', shell: process.platform === 'win32', env: { ...process.env, MONGODB_URI: uri } })
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => child.kill(sig))
const code = await new Promise(resolve => child.on('exit', (c, s) => resolve(c ?? (s ? 128 + 1 : 1))))
await replSet.stop()
process.exit(code)
