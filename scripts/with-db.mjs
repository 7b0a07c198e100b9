// Runs a command with MONGODB_URI pointing at a resolved server (see resolve-db.mjs: MONGODB_URI,
// else FWB_ENGINE=ferretdb|docdb, else whatever it finds), then stops whatever server it started.
// Usage: node scripts/with-db.mjs <cmd> [args…]
import { spawn } from 'node:child_process'
import { constants } from 'node:os'
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
// Signals. The command runs in a process group (and session) of its own, so that it gets each
// signal once, from here: in with-db's group, a signal sent to the whole group (Ctrl-C in a
// terminal, `kill -INT -pgid`) reached it directly AND forwarded, and the example server, which
// drains on the first SIGINT and exits at the second, was killed mid-drain. Forwarding is then
// the only path, so a signal sent to with-db alone (`kill <pid>`, an orchestrator's SIGTERM)
// reaches the command too. A repeat of the same signal within REPEAT_MS is one event that
// arrived twice (`timeout` signals its child, then its own group) and is not passed on; a later
// one is (Ctrl-C again: the server then exits without draining). The command's group is not
// the terminal's foreground group, so a terminal's signals reach it only through here.
const REPEAT_MS = 1000
const child = spawn(cmd, args, { stdio: 'inherit', detached: true, env: { ...process.env, MONGODB_URI: db.uri } })
const lastForwarded = new Map()
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => {
    if (child.exitCode !== null || child.signalCode !== null) return
    const now = Date.now()
    if (now - (lastForwarded.get(signal) ?? -Infinity) < REPEAT_MS) return
    lastForwarded.set(signal, now)
    child.kill(signal)
  })
}
// with-db failing (it should not) must not leave the command running on its own
process.on('exit', () => { if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM') })
const code = await new Promise(resolve => {
  child.once('error', err => { console.error(`[db] ${cmd}: ${err.message}`); resolve(127) })
  child.once('exit', (exitCode, signal) => resolve(exitCode ?? 128 + (constants.signals[signal] ?? 0)))
})
// after the command has exited, whatever signals came: stop only what resolveMongo started, once
await db.stop()
process.exit(code)
