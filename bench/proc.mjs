// CPU accounting from /proc (Linux): the database server's processes, the machine's idle
// share, and this process's own CPU. Elsewhere every reading is null (the bench still runs).
import { execFileSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'

// comm is cut to 15 characters, and scripts/dev-db.sh runs FerretDB as `ferretdb-v1.24.2`
const isServer = comm => comm.startsWith('ferretdb') || comm === 'postgres' || comm === 'mongod' || comm === 'mongos'
let clockTicks = 100
try { clockTicks = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100 } catch {}

/** PIDs of the database server processes on this machine (FerretDB + PostgreSQL, or mongod). */
export function serverPids () {
  const pids = []
  let entries
  try { entries = readdirSync('/proc') } catch { return pids }
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue
    try {
      if (isServer(readFileSync(`/proc/${e}/comm`, 'utf8').trim())) pids.push(Number(e))
    } catch {} // gone meanwhile
  }
  return pids
}

/** CPU seconds used so far by these processes (utime + stime); processes that died count 0. */
function cpuSeconds (pids) {
  let ticks = 0
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ') // comm may hold spaces
      ticks += Number(fields[11]) + Number(fields[12])
    } catch {}
  }
  return ticks / clockTicks
}

function machineTicks () {
  try {
    const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number)
    return { idle: cpu[3] + cpu[4], total: cpu.reduce((a, b) => a + b, 0) }
  } catch {
    return null
  }
}

/** Starts a measurement; `stop()` returns CPU seconds of the app and the server and the machine's idle share. */
export function cpuMeter () {
  const pids = serverPids() // server processes may come and go (PostgreSQL backends): re-read at the end
  const serverBefore = cpuSeconds(pids)
  const app = process.cpuUsage()
  const machine = machineTicks()
  return {
    stop () {
      const appUs = process.cpuUsage(app)
      const after = pids.concat(serverPids().filter(p => !pids.includes(p)))
      const m = machineTicks()
      return {
        appCpuS: (appUs.user + appUs.system) / 1e6,
        serverCpuS: pids.length === 0 ? null : cpuSeconds(after) - serverBefore,
        idleShare: machine === null || m === null ? null : (m.idle - machine.idle) / (m.total - machine.total),
      }
    },
  }
}
