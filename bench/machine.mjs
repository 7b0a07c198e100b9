// The machine and server a run was measured on.
import { MongoClient } from 'mongodb'
import os from 'node:os'

export async function machineInfo (uri) {
  const client = new MongoClient(uri)
  try {
    const info = await client.db('admin').admin().command({ buildInfo: 1 })
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
        source: info.ferretdbVersion === undefined ? 'MongoDB' : 'FerretDB',
        version: info.ferretdbVersion ?? info.version,
        reportsMongoVersion: info.version,
      },
    }
  } finally {
    await client.close()
  }
}
