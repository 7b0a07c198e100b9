import { MongoClient, type Db, type MongoClientOptions } from 'mongodb'
import { inject } from 'vitest'

export const mongoUri = (): string => inject('mongoUri')

/**
 * A client and a fresh database of its own for one test file: `fwb_<name>`, dropped first.
 * Test files run side by side (vitest.config.ts), so `name` must be one no other file uses.
 */
export async function openDb (name: string, options?: MongoClientOptions): Promise<{ client: MongoClient, db: Db }> {
  const client = new MongoClient(mongoUri(), { monitorCommands: true, ...options })
  await client.connect()
  const db = client.db(`fwb_${name}`)
  await db.dropDatabase()
  return { client, db }
}

/** Counts bulk write commands (insert/update/delete) seen by the driver's command monitoring. */
export function countWriteCommands (client: MongoClient): { counts: Record<string, number>, total: () => number } {
  const counts: Record<string, number> = {}
  client.on('commandStarted', ev => {
    if (ev.commandName === 'insert' || ev.commandName === 'update' || ev.commandName === 'delete' || ev.commandName === 'find') {
      counts[ev.commandName] = (counts[ev.commandName] ?? 0) + 1
    }
  })
  return { counts, total: () => (counts.insert ?? 0) + (counts.update ?? 0) + (counts.delete ?? 0) }
}
