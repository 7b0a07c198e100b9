// What a MongoDB wire-protocol server is, and which behaviours the suite depends on it has:
// measured on the server itself, never inferred from its name. Shared by the test setup
// (test/global-setup.ts provides both to every test), the bench (bench/machine.mjs) and
// `node scripts/server-info.mjs [--markdown]` (prints them for MONGODB_URI, or for the server
// scripts/resolve-db.mjs finds).
import { Decimal128, Long, MongoBulkWriteError, MongoClient } from 'mongodb'

/**
 * The server's engine and version from `buildInfo`: FerretDB 1.x reports `ferretdbVersion`,
 * FerretDB 2.x (whose only backend is DocumentDB) `ferretdb.version`; MongoDB neither.
 * @returns {Promise<{ engine: 'mongodb' | 'ferretdb' | 'docdb', name: string, version: string, reportsMongoVersion: string }>}
 */
export async function describeServer (client) {
  const info = await client.db('admin').command({ buildInfo: 1 })
  if (typeof info.ferretdbVersion === 'string') {
    return { engine: 'ferretdb', name: 'FerretDB', version: info.ferretdbVersion, reportsMongoVersion: info.version }
  }
  if (typeof info.ferretdb?.version === 'string') {
    return { engine: 'docdb', name: 'FerretDB + DocumentDB', version: info.ferretdb.version, reportsMongoVersion: info.version }
  }
  return { engine: 'mongodb', name: 'MongoDB', version: String(info.version), reportsMongoVersion: String(info.version) }
}

/** Each behaviour: the name a skip states, and what the probe checks. Order = the capability table's (CONTRIBUTING.md). */
export const CAPABILITIES = {
  perStatementInsertErrors: {
    name: 'per-statement insert errors',
    what: 'an unordered insert with a duplicate key reports writeErrors[{index, code: 11000}] at that insert\'s index and stores the others',
  },
  perStatementErrors: {
    name: 'per-statement errors',
    what: 'the same for updates: an unordered update command whose middle statement hits a duplicate key reports that statement\'s index and applies the statements after it',
  },
  arrayFilters: { name: 'arrayFilters', what: 'an update with arrayFilters changes exactly the matching array elements' },
  pipelineUpdates: { name: 'pipeline updates', what: 'an update given as an aggregation pipeline ([{ $set: { b: \'$a\' } }]) is applied' },
  collationOnUpdate: { name: 'collation on update', what: 'an update with a case-insensitive collation matches a document differing only in case' },
  hintChecked: { name: 'hint checked', what: 'an update hinting an index that does not exist is refused as its own writeError' },
  newFieldsInPathOrder: {
    name: 'new fields in path order',
    what: 'one update adding `zeta` then `alpha` stores `alpha` first (MongoDB 5+ applies an update\'s fields in path order)',
  },
  rename: { name: '$rename', what: '$rename moves a field' },
  decimal128: { name: 'exact Decimal128', what: 'Decimal128("1.0") is stored and read back as Decimal128("1.0")' },
  replicaSet: { name: 'replica set', what: '`hello` names a replica set (retryable writes with txnNumbers)' },
  retryableWritesExactlyOnce: {
    name: 'retryable writes exactly once',
    what: 'one insert sent twice with the same lsid and txnNumber (what the driver\'s resend of a write is) is applied once: the second attempt answers the first\'s result (n: 1, no writeErrors)',
  },
  transactions: { name: 'transactions', what: 'an insert inside withTransaction commits' },
  changeStreams: { name: 'change streams', what: 'collection.watch() opens a change stream' },
  clientBulkWrite: { name: 'MongoClient.bulkWrite', what: 'the driver\'s cross-collection bulkWrite (the server\'s bulkWrite command, MongoDB 8) inserts' },
}

const DB_NAME = 'fwb_capability_probe'

/** Runs `probe`; any error (or a hang past 5 s) means "no". */
async function holds (probe) {
  let timer
  const timeout = new Promise(resolve => { timer = setTimeout(resolve, 5_000, false) })
  try {
    return await Promise.race([probe().then(Boolean, () => false), timeout])
  } finally {
    clearTimeout(timer)
  }
}

const probes = {
  async perStatementInsertErrors (db) {
    const c = db.collection('ins')
    await c.createIndex({ u: 1 }, { unique: true })
    const err = await c.insertMany([{ _id: 1, u: 1 }, { _id: 2, u: 1 }, { _id: 3, u: 3 }], { ordered: false }).then(() => undefined, e => e)
    if (!(err instanceof MongoBulkWriteError)) return false
    const errors = err.writeErrors ?? []
    const list = Array.isArray(errors) ? errors : [errors]
    return list.length === 1 && list[0].index === 1 && list[0].code === 11000 && await c.countDocuments() === 2
  },
  async perStatementErrors (db) {
    const c = db.collection('upd')
    await c.createIndex({ u: 1 }, { unique: true })
    await c.insertMany([{ _id: 1, u: 1 }, { _id: 2, u: 2 }])
    // one update command of three statements; the middle one collides
    const err = await c.bulkWrite([
      { updateOne: { filter: { _id: 1 }, update: { $set: { x: 1 } } } },
      { updateOne: { filter: { _id: 2 }, update: { $set: { u: 1 } } } },
      { updateOne: { filter: { _id: 2 }, update: { $set: { y: 1 } } } },
    ], { ordered: false }).then(() => undefined, e => e)
    if (!(err instanceof MongoBulkWriteError)) return false
    const errors = err.writeErrors ?? []
    const list = Array.isArray(errors) ? errors : [errors]
    const docs = await c.find({}, { sort: { _id: 1 } }).toArray()
    return list.length === 1 && list[0].index === 1 && list[0].code === 11000 &&
      docs[0]?.x === 1 && docs[1]?.y === 1 && docs[1]?.u === 2
  },
  async arrayFilters (db) {
    const c = db.collection('af')
    await c.insertOne({ _id: 1, a: [1, 2, 3] })
    await c.updateOne({ _id: 1 }, { $set: { 'a.$[e]': 0 } }, { arrayFilters: [{ e: { $gt: 1 } }] })
    return JSON.stringify((await c.findOne({ _id: 1 }))?.a) === '[1,0,0]'
  },
  async pipelineUpdates (db) {
    const c = db.collection('pipe')
    await c.insertOne({ _id: 1, a: 5 })
    await c.updateOne({ _id: 1 }, [{ $set: { b: '$a' } }])
    return (await c.findOne({ _id: 1 }))?.b === 5
  },
  async collationOnUpdate (db) {
    const c = db.collection('coll')
    await c.insertOne({ _id: 1, s: 'abc' })
    const r = await c.updateOne({ s: 'ABC' }, { $set: { hit: 1 } }, { collation: { locale: 'en', strength: 2 } })
    return r.matchedCount === 1 && (await c.findOne({ _id: 1 }))?.hit === 1
  },
  async hintChecked (db) {
    const c = db.collection('hint')
    await c.insertOne({ _id: 1 })
    const err = await c.bulkWrite([{ updateOne: { filter: { _id: 1 }, update: { $set: { h: 1 } }, hint: 'no_such_index_1' } }], { ordered: false })
      .then(() => undefined, e => e)
    return err instanceof MongoBulkWriteError && (err.writeErrors?.length ?? (err.writeErrors ? 1 : 0)) === 1
  },
  async newFieldsInPathOrder (db) {
    const c = db.collection('order')
    await c.insertOne({ _id: 1, k: 0 })
    await c.updateOne({ _id: 1 }, { $set: { zeta: 1, alpha: 1 } })
    return Object.keys(await c.findOne({ _id: 1 }) ?? {}).join() === '_id,k,alpha,zeta'
  },
  async rename (db) {
    const c = db.collection('ren')
    await c.insertOne({ _id: 1, a: 1 })
    await c.updateOne({ _id: 1 }, { $rename: { a: 'b' } })
    const doc = await c.findOne({ _id: 1 })
    return doc?.b === 1 && !('a' in doc)
  },
  async decimal128 (db) {
    const c = db.collection('dec')
    await c.insertOne({ _id: 1, d: Decimal128.fromString('1.0') })
    const d = (await c.findOne({ _id: 1 }, { promoteValues: false }))?.d
    return d instanceof Decimal128 && d.toString() === '1.0'
  },
  async replicaSet (db) {
    const hello = await db.admin().command({ hello: 1 })
    return typeof hello.setName === 'string'
  },
  async retryableWritesExactlyOnce (db, client) {
    const c = db.collection('retry')
    await c.insertOne({ _id: 0 }) // the collection exists before the attempts
    // db.command() with an explicit session: the driver adds the session's lsid and leaves the
    // command's own txnNumber as it is (it sets one only for the writes it may retry itself)
    const sent = []
    client.on('commandStarted', e => { if (e.commandName === 'insert' && e.command.txnNumber !== undefined) sent.push(e.command) })
    const session = client.startSession()
    try {
      const command = { insert: 'retry', documents: [{ _id: 1 }], txnNumber: Long.fromNumber(1) }
      const first = await db.command(command, { session })
      const second = await db.command(command, { session })
      const lsid = i => Buffer.from(sent[i]?.lsid?.id?.buffer ?? []).toString('hex')
      if (sent.length !== 2 || lsid(0) === '' || lsid(0) !== lsid(1) || String(sent[0].txnNumber) !== String(sent[1].txnNumber)) {
        throw new Error('the two attempts did not carry one lsid and txnNumber')
      }
      // a server ignoring txnNumber answers the second with a duplicate key (11000); a standalone MongoDB refuses txnNumber
      return [first, second].every(r => r.ok === 1 && r.n === 1 && (r.writeErrors ?? []).length === 0) &&
        await c.countDocuments({ _id: 1 }) === 1
    } finally {
      await session.endSession()
    }
  },
  async transactions (db, client) {
    const c = db.collection('txn')
    await c.insertOne({ _id: 0 }) // the collection exists before the transaction (MongoDB < 4.4 needs that)
    const session = client.startSession()
    try {
      await session.withTransaction(async () => { await c.insertOne({ _id: 1 }, { session }) })
    } finally {
      await session.endSession()
    }
    return await c.countDocuments({ _id: 1 }) === 1
  },
  async changeStreams (db) {
    const stream = db.collection('cs').watch([], { maxAwaitTimeMS: 10 })
    try {
      await stream.tryNext()
      return true
    } finally {
      await stream.close()
    }
  },
  async clientBulkWrite (db, client) {
    if (typeof client.bulkWrite !== 'function') return false
    const r = await client.bulkWrite([{ name: 'insertOne', namespace: `${DB_NAME}.cbw`, document: { _id: 1 } }])
    return r.insertedCount === 1
  },
}

/**
 * Probes every capability on a scratch database (dropped before and after), each on its own
 * collection, with a client of its own: a probe that makes the server close the connection
 * (FerretDB 1.x does on Decimal128) cannot spoil the next one.
 * @returns {Promise<Record<keyof typeof CAPABILITIES, boolean>>}
 */
export async function probeCapabilities (uri) {
  const result = {}
  const admin = new MongoClient(uri, { serverSelectionTimeoutMS: 5_000 })
  try {
    await admin.db(DB_NAME).dropDatabase()
    for (const key of Object.keys(CAPABILITIES)) {
      const client = new MongoClient(uri, { serverSelectionTimeoutMS: 5_000, socketTimeoutMS: 5_000, retryWrites: false, monitorCommands: true })
      try {
        result[key] = await holds(async () => { await client.connect(); return probes[key](client.db(DB_NAME), client) })
      } finally {
        await client.close().catch(() => {})
      }
    }
    await admin.db(DB_NAME).dropDatabase()
  } finally {
    await admin.close()
  }
  return result
}

/** One line per capability: "yes"/"no", its name, and what was checked. */
export function capabilityLines (caps) {
  return Object.entries(CAPABILITIES).map(([key, c]) => `${caps[key] ? 'yes' : 'no '}  ${c.name}: ${c.what}`)
}

/** The capability table (CONTRIBUTING.md): one column per measured server. */
export function capabilityMarkdown (columns) {
  const head = `| capability (what the probe checks) | ${columns.map(c => c.title).join(' | ')} |`
  const rule = `| --- | ${columns.map(() => '---').join(' | ')} |`
  const rows = Object.entries(CAPABILITIES).map(([key, c]) =>
    `| **${c.name}**: ${c.what} | ${columns.map(col => col.caps[key] ? 'yes' : 'no').join(' | ')} |`)
  return [head, rule, ...rows].join('\n')
}

// CLI: node scripts/server-info.mjs [--markdown] [URI…]
// Without URIs: the server resolve-db.mjs finds (MONGODB_URI, FWB_ENGINE…). --markdown prints the
// the capability table (CONTRIBUTING.md), one column per server.
if (process.argv[1] !== undefined && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  const args = process.argv.slice(2)
  const uris = args.filter(a => !a.startsWith('--'))
  const resolved = []
  if (uris.length === 0) {
    const { resolveMongo } = await import('./resolve-db.mjs')
    const db = await resolveMongo()
    resolved.push(db)
    uris.push(db.uri)
  }
  try {
    const columns = []
    for (const uri of uris) {
      const client = new MongoClient(uri, { serverSelectionTimeoutMS: 30_000 })
      const server = await describeServer(client).finally(() => client.close())
      columns.push({ title: `${server.name} ${server.version}`, uri, caps: await probeCapabilities(uri) })
    }
    if (args.includes('--markdown')) console.log(capabilityMarkdown(columns))
    else for (const c of columns) console.log(`${c.title} (${c.uri})\n${capabilityLines(c.caps).join('\n')}`)
  } finally {
    for (const db of resolved) await db.stop()
  }
}
