// A monitored client and a freshly dropped database per suite, plus the document every
// insert benchmark writes.
import { MongoClient } from 'mongodb'
import { CommandCounter } from './command-counter.mjs'

export async function freshDb (uri, name, counterOptions) {
  const client = new MongoClient(uri, { monitorCommands: true })
  await client.connect()
  const db = client.db(`fwb_bench_${name}`)
  await db.dropDatabase()
  return { client, db, commands: new CommandCounter(client, counterOptions) }
}

/** ~80 bytes of BSON: small, like an event or audit record. */
export function smallDoc (i) {
  return { i, kind: 'click', user: `u${i % 1000}`, at: new Date() }
}
