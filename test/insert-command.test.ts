import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Collection, MongoClient, type CommandStartedEvent, type Db, type Document } from 'mongodb'
import { WriteBuffer, WriteRejectedError } from '../src/index.js'
import { mongoUri, openDb } from './helpers.js'
import { capabilities, lacks, server } from './support/capabilities.js'

// Batches of inserts go as the one `insert` command an unordered bulkWrite of them is on the
// wire, through db.command (src/mongo/write-command.ts): the same command, without the
// driver's bulk layer around it — on a deployment where the driver never resends a write on
// its own (a standalone server), or where its resend is not exactly-once (a replica set that
// is not MongoDB); MongoDB's replica sets keep bulkWrite and its retryable writes; for batches
// one command body carries.

let client: MongoClient
let db: Db

beforeAll(async () => { ({ client, db } = await openDb('insert_command', { ignoreUndefined: true, writeConcern: { w: 1, wtimeoutMS: 4000 } })) })
afterAll(async () => { await client.close() })

/** The insert commands the client sends while `work` runs, without the fields of the session (lsid, txnNumber, $db…). */
async function insertsDuring (work: () => Promise<unknown>): Promise<Document[]> {
  const seen: Document[] = []
  const listener = (ev: CommandStartedEvent): void => {
    if (ev.commandName !== 'insert') return
    const { insert, documents, ordered, maxTimeMS, writeConcern } = ev.command
    seen.push({ insert, documents, ordered, maxTimeMS, writeConcern })
  }
  client.on('commandStarted', listener)
  try {
    await work()
  } finally {
    client.off('commandStarted', listener)
  }
  return seen
}

/** Calls of Collection#bulkWrite (the driver's bulk layer) while `work` runs. */
async function bulkWritesDuring (work: () => Promise<unknown>): Promise<number> {
  const original = Collection.prototype.bulkWrite
  let calls = 0
  Collection.prototype.bulkWrite = function (this: Collection, ...args: Parameters<Collection['bulkWrite']>) {
    calls++
    return original.apply(this, args)
  } as Collection['bulkWrite']
  try {
    await work()
  } finally {
    Collection.prototype.bulkWrite = original
  }
  return calls
}

describe('inserts go out as one insert command, not through the driver\'s bulkWrite', () => {
  it('200 awaited inserts: insert commands carrying all 200, no bulkWrite call, all stored', async () => {
    const wb = new WriteBuffer(db, { lingerMs: 50 })
    const events = wb.collection('events')
    let ids: unknown[] = []
    let sent: Document[] = []
    const bulkWrites = await bulkWritesDuring(async () => {
      sent = await insertsDuring(async () => {
        ids = (await Promise.all(Array.from({ length: 200 }, (_, i) => events.insertOne({ i })))).map(r => r.insertedId)
      })
    })
    expect(bulkWrites).toBe(0)
    expect(sent.reduce((n, c) => n + (c.documents as unknown[]).length, 0)).toBe(200)
    expect(await db.collection('events').countDocuments()).toBe(200)
    expect(new Set(ids.map(String)).size).toBe(200)
    await wb.close()
  })

  it('the command is the one the driver\'s bulkWrite sends: same documents, ordered, maxTimeMS and the client\'s write concern (w 1, wtimeout 4000)', async () => {
    const wb = new WriteBuffer(db, { lingerMs: 50 })
    const docs = (tag: string): Document[] => Array.from({ length: 5 }, (_, i) => ({ _id: `${tag}${i}`, i, at: new Date(0), skipped: undefined }))
    const ours = await insertsDuring(() => Promise.all(docs('b').map(d => wb.collection('same').insertOne(d))))
    const theirs = await insertsDuring(() => db.collection('same').bulkWrite(docs('r').map(document => ({ insertOne: { document } })), { ordered: false, maxTimeMS: 5000 }))
    expect(ours).toHaveLength(1)
    expect(theirs).toHaveLength(1)
    const strip = (c: Document): Document => ({ ...c, documents: (c.documents as Document[]).map(d => ({ ...d, _id: String(d._id).slice(1) })) })
    expect(strip(ours[0] as Document)).toEqual(strip(theirs[0] as Document))
    expect((ours[0] as Document).writeConcern).toEqual({ w: 1, wtimeout: 4000 })
    // stored with the client's BSON options (ignoreUndefined): the undefined field is not there
    expect(await db.collection<{ _id: string }>('same').findOne({ _id: 'b0' })).toEqual({ _id: 'b0', i: 0, at: new Date(0) })
    await wb.close()
  })

  it('the buffer\'s writeConcern option replaces the client\'s, as in a bulkWrite', async () => {
    const wb = new WriteBuffer(db, { writeConcern: { w: 1 } })
    const sent = await insertsDuring(() => wb.collection('wc').insertOne({ a: 1 }))
    expect(sent.map(c => c.writeConcern)).toEqual([{ w: 1 }])
    await wb.close()
  })

  it.skipIf(lacks('perStatementInsertErrors'))('a duplicate _id among good inserts: that caller alone is rejected with 11000, the server\'s write error as cause; the others are stored [needs per-statement insert errors]', async () => {
    await db.collection<{ _id: string }>('dup').insertOne({ _id: 'taken' })
    const wb = new WriteBuffer(db, { lingerMs: 50 })
    const dup = wb.collection('dup')
    const settled = await Promise.allSettled([dup.insertOne({ a: 1 }), dup.insertOne({ _id: 'taken', a: 2 }), dup.insertOne({ a: 3 })])
    expect(settled.map(s => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled'])
    const reason = (settled[1] as PromiseRejectedResult).reason as WriteRejectedError
    expect(reason).toBeInstanceOf(WriteRejectedError)
    expect(reason.code).toBe(11000)
    expect(reason.outcome).toBe('rejected')
    expect((reason.cause as { code?: unknown, index?: unknown }).code).toBe(11000)
    expect(await db.collection('dup').countDocuments()).toBe(3)
    await wb.close()
  })

  it.skipIf(lacks('perStatementInsertErrors'))('a client that reads replies with promoteValues: false: a refused insert is still rejected, not taken for applied [needs per-statement insert errors]', async () => {
    const raw = new MongoClient(mongoUri(), { promoteValues: false })
    await raw.connect()
    try {
      const wb = new WriteBuffer(raw.db(db.databaseName), { lingerMs: 50 })
      const pv = wb.collection('pv')
      await pv.insertOne({ _id: 'first' })
      const settled = await Promise.allSettled([pv.insertOne({ a: 1 }), pv.insertOne({ _id: 'first', a: 2 })])
      expect(settled.map(s => s.status)).toEqual(['fulfilled', 'rejected'])
      expect(((settled[1] as PromiseRejectedResult).reason as WriteRejectedError).code).toBe(11000)
      await wb.close()
    } finally {
      await raw.close()
    }
  })

  // Where the driver may resend a write on its own (a replica set) and the server is not MongoDB,
  // the driver's resend is not exactly-once (docs/server-behaviours.md: a replica set in name only): every batch goes as a write command
  // then, bounded to one command body (src/buffer/wire.ts)
  const commandsOnly = (): boolean => capabilities().replicaSet && server().engine !== 'mongodb'

  it('a batch of more than 4 MiB goes as a bulkWrite, which splits what one command body cannot carry — or, where only commands may go, as batches of at most 4 MiB', async () => {
    const wb = new WriteBuffer(db, { lingerMs: 50 })
    const blob = 'x'.repeat(1024 * 1024)
    let sent: Document[] = []
    const bulkWrites = await bulkWritesDuring(async () => {
      sent = await insertsDuring(() => Promise.all(Array.from({ length: 6 }, () => wb.collection('big').insertOne({ blob }))))
    })
    if (commandsOnly()) {
      expect(bulkWrites).toBe(0)
      expect(sent.length).toBeGreaterThan(1)
      for (const command of sent) expect((command.documents as unknown[]).length).toBeLessThanOrEqual(4)
    } else {
      expect(bulkWrites).toBeGreaterThan(0)
    }
    expect(await db.collection('big').countDocuments()).toBe(6)
    await wb.close()
  })

  it('updates go through bulkWrite (with the driver\'s retryable writes where the deployment has them) — as the update command where the driver\'s resend is not exactly-once', async () => {
    const wb = new WriteBuffer(db)
    const bulkWrites = await bulkWritesDuring(() => wb.collection('upd').updateOne({ _id: 1 }, { $set: { a: 1 } }, { upsert: true }))
    expect(bulkWrites).toBe(commandsOnly() ? 0 : 1)
    expect(await db.collection('upd').findOne({ _id: 1 as never })).toEqual({ _id: 1, a: 1 })
    await wb.close()
  })
})
