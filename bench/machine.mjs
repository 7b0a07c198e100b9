// The machine and server a run was measured on.
import { MongoClient } from 'mongodb'
import os from 'node:os'
import { describeServer } from '../scripts/server-info.mjs'

export async function machineInfo (uri) {
  const client = new MongoClient(uri)
  try {
    // engine and version from buildInfo: FerretDB reports its own version beside the MongoDB one it emulates
    const server = await describeServer(client)
    const cpus = os.cpus()
    return {
      os: `${os.type()} ${os.release()} ${os.arch()}`,
      cpus: cpus.length,
      cpuModel: cpus[0]?.model.trim() ?? 'unknown',
      memoryGiB: Math.round(os.totalmem() / 2 ** 30),
      /** other work on the machine at the start (the bench shares it) */
      loadAvg1mAtStart: Math.round(os.loadavg()[0] * 100) / 100,
      node: process.versions.node,
      server: {
        source: server.name,
        engine: server.engine,
        version: server.version,
        reportsMongoVersion: server.reportsMongoVersion,
      },
    }
  } finally {
    await client.close()
  }
}
