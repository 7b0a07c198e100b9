import net from 'node:net'
import { describe, expect, it } from 'vitest'
import { BSON, MongoClient, MongoNetworkError, MongoServerError, MongoWriteConcernError, type Db, type MongoClientOptions } from 'mongodb'
import { mongoUri } from './helpers.js'
import { lacks } from './support/capabilities.js'
import { FaultProxy } from './support/fault-proxy.js'
import { proxiedSuite } from './support/proxied.js'
import { MessageFramer, OP_MSG, readCommand } from './support/wire-messages.js'

// The fault injector itself, against the suite's server: each rule kind does what MongoDB's
// failCommand does (applied or not, the error the client gets), counted as asked, and a
// replica set behind the proxy is discovered through it, never around it. Each test has its own
// collection and its own client through the proxy; nothing here asserts a duration.

const suite = proxiedSuite('fault_proxy', { perTest: true })

/** A client through the proxy, on the test database (closed after the test). */
async function through (options: MongoClientOptions = {}): Promise<Db> {
  return (await suite.through({ serverSelectionTimeoutMS: 10_000, retryWrites: false, ...options })).db(suite.direct.db.databaseName)
}

interface Doc { _id: number, x?: number }

const stored = (collection: string, _id: number): Promise<Doc | null> => suite.direct.db.collection<Doc>(collection).findOne({ _id })

/** Polls until `check` holds (a late write landing), up to `ms`. */
async function eventually (check: () => Promise<boolean>, ms = 20_000): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise(resolve => setTimeout(resolve, 100))) {
    if (await check()) return true
  }
  return check()
}

describe('framing', () => {
  it('messages split across chunks and several in one chunk come out whole, in order', () => {
    const msg = (n: number): Buffer => {
      const body = BSON.serialize({ insert: `c${n}`, documents: Array.from({ length: n }, (_, i) => ({ i })), $db: 'x' })
      const out = Buffer.concat([Buffer.alloc(20), Buffer.from([0]), body])
      out.writeInt32LE(out.length, 0)
      out.writeInt32LE(n, 4)
      out.writeInt32LE(OP_MSG, 12)
      return out
    }
    const stream = Buffer.concat([msg(1), msg(2), msg(3)])
    const byteByByte = new MessageFramer()
    const got: Buffer[] = []
    for (let i = 0; i < stream.length; i++) got.push(...byteByByte.push(stream.subarray(i, i + 1)))
    const atOnce = new MessageFramer().push(stream)
    for (const messages of [got, atOnce]) {
      expect(messages.map(m => readCommand(m))).toMatchObject([1, 2, 3].map(n => ({ name: 'insert', collection: `c${n}`, statements: n })))
    }
  })
})

describe('failCommand-like rules', () => {
  it('errorCode before: the client gets the server-shaped error, the document is not applied', async () => {
    const db = await through()
    const rule = suite.proxy.fail({ commands: ['insert'], collection: 'err_before', errorCode: 2, errmsg: 'injected', times: 1 })
    const err = await db.collection<Doc>('err_before').insertOne({ _id: 1 }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(MongoServerError)
    expect(err).toMatchObject({ code: 2, codeName: 'BadValue', errmsg: 'injected' })
    expect(rule.fired).toBe(1)
    expect(await stored('err_before', 1)).toBeNull()
    // times: 1 — the next one goes through
    await db.collection<Doc>('err_before').insertOne({ _id: 2 })
    expect(await stored('err_before', 2)).not.toBeNull()
  })

  it('errorCode after: the document is applied, the client still gets the error (with the labels asked for)', async () => {
    const db = await through()
    suite.proxy.fail({ commands: ['insert'], collection: 'err_after', errorCode: 8, errorLabels: ['Injected'], when: 'after', times: 1 })
    const err = await db.collection<Doc>('err_after').insertOne({ _id: 1 }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(MongoServerError)
    expect((err as MongoServerError).code).toBe(8)
    expect((err as MongoServerError).hasErrorLabel('Injected')).toBe(true)
    expect(await stored('err_after', 1)).not.toBeNull()
  })

  it('closeConnection before: a network error, nothing applied', async () => {
    const db = await through()
    suite.proxy.fail({ commands: ['insert'], collection: 'close_before', closeConnection: true, times: 1 })
    const err = await db.collection<Doc>('close_before').insertOne({ _id: 1 }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(MongoNetworkError)
    expect(await stored('close_before', 1)).toBeNull()
    // the client goes on over a new connection
    await db.collection<Doc>('close_before').insertOne({ _id: 2 })
    expect(await stored('close_before', 2)).not.toBeNull()
  })

  it('closeConnection after: a network error, the document applied', async () => {
    const db = await through()
    suite.proxy.fail({ commands: ['insert'], collection: 'close_after', closeConnection: true, when: 'after', times: 1 })
    const err = await db.collection<Doc>('close_after').insertOne({ _id: 1 }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(MongoNetworkError)
    expect(await stored('close_after', 1)).not.toBeNull()
  })

  it('blockConnection alone: the client times out, the request still reaches the server afterwards and is applied', async () => {
    const db = await through({ socketTimeoutMS: 500 })
    const rule = suite.proxy.fail({ commands: ['insert'], collection: 'blocked', blockConnection: true, blockTimeMS: 2_500, times: 1 })
    const err = await db.collection<Doc>('blocked').insertOne({ _id: 1 }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(MongoNetworkError) // MongoNetworkTimeoutError: the client gave up first
    expect(rule.fired).toBe(1)
    expect(await eventually(async () => await stored('blocked', 1) !== null)).toBe(true)
  })

  it('blockConnection with errorCode: held, then failed, never applied', async () => {
    const db = await through()
    suite.proxy.fail({ commands: ['insert'], collection: 'blocked_err', blockConnection: true, blockTimeMS: 300, errorCode: 2, times: 1 })
    await expect(db.collection<Doc>('blocked_err').insertOne({ _id: 1 })).rejects.toMatchObject({ code: 2 })
    expect(await stored('blocked_err', 1)).toBeNull()
  })

  it('writeConcernError: applied, and the driver reports a MongoWriteConcernError', async () => {
    const db = await through()
    suite.proxy.fail({ commands: ['insert'], collection: 'wce', writeConcernError: { code: 100, errmsg: 'injected wce', errInfo: { why: 'test' } }, times: 1 })
    const err = await db.collection<Doc>('wce').insertOne({ _id: 1 }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(MongoWriteConcernError)
    expect(err).toMatchObject({ code: 100 })
    expect(await stored('wce', 1)).not.toBeNull()
  })

  it('skip and times: the first two pass, the next two fail, the rest pass', async () => {
    const db = await through()
    const rule = suite.proxy.fail({ commands: ['insert'], collection: 'counts', errorCode: 2, skip: 2, times: 2 })
    const outcomes: string[] = []
    for (let i = 0; i < 6; i++) {
      outcomes.push(await db.collection<Doc>('counts').insertOne({ _id: i }).then(() => 'ok', () => 'failed'))
    }
    expect(outcomes).toEqual(['ok', 'ok', 'failed', 'failed', 'ok', 'ok'])
    expect(rule.fired).toBe(2)
    expect(await suite.direct.db.collection<Doc>('counts').countDocuments()).toBe(4)
  })

  it('off(): the rule stops firing', async () => {
    const db = await through()
    const rule = suite.proxy.fail({ commands: ['insert'], collection: 'off', errorCode: 2 })
    await expect(db.collection<Doc>('off').insertOne({ _id: 1 })).rejects.toMatchObject({ code: 2 })
    rule.off()
    await db.collection<Doc>('off').insertOne({ _id: 2 })
    expect(rule.fired).toBe(1)
  })

  it('collection and appName filters: only the matching collection and the matching client are failed', async () => {
    const victim = await through({ appName: 'fp-victim' })
    const bystander = await through({ appName: 'fp-bystander' })
    suite.proxy.fail({ commands: ['insert'], collection: 'filtered', appName: 'fp-victim', errorCode: 2 })
    await expect(victim.collection<Doc>('filtered').insertOne({ _id: 1 })).rejects.toMatchObject({ code: 2 })
    await victim.collection<Doc>('other').insertOne({ _id: 1 })
    await bystander.collection<Doc>('filtered').insertOne({ _id: 2 })
    expect(await stored('filtered', 1)).toBeNull()
    expect(await stored('other', 1)).not.toBeNull()
    expect(await stored('filtered', 2)).not.toBeNull()
    const inserts = suite.proxy.seen().filter(c => c.name === 'insert')
    expect(inserts.map(c => [c.collection, c.appName, c.faulted])).toEqual([
      ['filtered', 'fp-victim', true], ['other', 'fp-victim', false], ['filtered', 'fp-bystander', false],
    ])
  })

  it('a malformed rule is a TypeError', () => {
    expect(() => suite.proxy.fail({ commands: [] as string[], errorCode: 2 })).toThrow(TypeError)
    expect(() => suite.proxy.fail({ commands: ['insert'] })).toThrow(TypeError)
    expect(() => suite.proxy.fail({ commands: ['insert'], blockConnection: true })).toThrow(TypeError)
  })
})

describe('seen()', () => {
  it('logs every command with its statements: documents, updates and deletes, handshakes included', async () => {
    const db = await through({ appName: 'fp-seen' })
    const coll = db.collection<Doc>('seen')
    await coll.insertMany([{ _id: 1 }, { _id: 2 }, { _id: 3 }, { _id: 4 }, { _id: 5 }])
    await coll.bulkWrite([1, 2, 3].map(_id => ({ updateOne: { filter: { _id }, update: { $set: { x: 1 } } } })))
    await coll.deleteMany({ _id: { $gt: 3 } })
    const log = suite.proxy.seen()
    expect(log.some(c => c.name === 'isMaster' || c.name === 'hello' || c.name === 'ismaster')).toBe(true)
    const writes = log.filter(c => c.collection === 'seen' && c.appName === 'fp-seen')
    expect(writes.map(c => [c.name, c.statements, c.faulted])).toEqual([['insert', 5, false], ['update', 3, false], ['delete', 1, false]])
    expect(writes.every(c => c.lsid !== undefined && typeof c.at === 'number')).toBe(true)
    suite.proxy.clear()
    expect(suite.proxy.seen()).toEqual([])
  })
})

describe('replica set behind the proxy', () => {
  it.skipIf(lacks('replicaSet'))('replicaSet: the driver discovers the set through the proxy and every insert goes through it', async () => {
    const client = new MongoClient(suite.proxy.uri(), { serverSelectionTimeoutMS: 10_000 })
    suite.closes(client)
    let topology = ''
    const addresses = new Set<string>()
    client.on('topologyDescriptionChanged', ev => {
      topology = ev.newDescription.type
      for (const address of ev.newDescription.servers.keys()) addresses.add(address)
    })
    await client.connect()
    const coll = client.db(suite.direct.db.databaseName).collection<Doc>('rs')
    for (let i = 0; i < 20; i++) await coll.insertOne({ _id: i })
    expect(topology).toBe('ReplicaSetWithPrimary')
    expect([...addresses]).toEqual([`127.0.0.1:${suite.proxy.port}`])
    expect(suite.proxy.seen().filter(c => c.name === 'insert' && c.collection === 'rs').map(c => c.statements)).toEqual(Array(20).fill(1))
    expect(await suite.direct.db.collection<Doc>('rs').countDocuments()).toBe(20)
  })

  it.skipIf(lacks('replicaSet'))('replicaSet: a retryable error is labelled as the server labels it, and the driver resends the write once, same lsid and txnNumber', async () => {
    const db = await through({ retryWrites: true })
    suite.proxy.fail({ commands: ['insert'], collection: 'retried', errorCode: 91, times: 1 })
    await db.collection<Doc>('retried').insertOne({ _id: 1 })
    const attempts = suite.proxy.seen().filter(c => c.name === 'insert' && c.collection === 'retried')
    expect(attempts.map(c => c.faulted)).toEqual([true, false])
    expect(attempts[0]?.txnNumber).toBeTypeOf('number')
    expect(attempts[1]?.txnNumber).toBe(attempts[0]?.txnNumber)
    expect(attempts[1]?.lsid).toEqual(attempts[0]?.lsid)
    expect(await stored('retried', 1)).not.toBeNull()
  })
})

describe('handshakes and abuse', () => {
  it('a handshake failed by a rule gets an OP_REPLY error the driver reads as the server\'s; the next heartbeat goes through', async () => {
    const rule = suite.proxy.fail({ commands: ['isMaster', 'ismaster', 'hello'], appName: 'fp-handshake', errorCode: 2, errmsg: 'handshake refused', times: 1 })
    const client = new MongoClient(suite.proxy.uri(), { appName: 'fp-handshake', serverSelectionTimeoutMS: 20_000, retryWrites: false })
    suite.closes(client)
    const failures: unknown[] = []
    client.on('serverHeartbeatFailed', ev => { failures.push(ev.failure) })
    await client.connect()
    await client.db(suite.direct.db.databaseName).collection<Doc>('handshake').insertOne({ _id: 1 })
    expect(rule.fired).toBe(1)
    // the driver's first handshake is the legacy OP_QUERY ismaster: the error went back as an OP_REPLY
    expect(suite.proxy.seen().find(c => c.faulted)?.name).toBe('ismaster')
    expect(failures[0]).toBeInstanceOf(MongoServerError)
    expect(failures[0]).toMatchObject({ code: 2, errmsg: 'handshake refused' })
  })

  it('clients that leave mid-message or send garbage, and a server that refuses, crash nothing; the proxy goes on', async () => {
    const half = net.connect(suite.proxy.port, '127.0.0.1')
    half.on('error', () => {})
    await new Promise(resolve => half.once('connect', resolve))
    half.write(Buffer.from([200, 0, 0, 0, 1, 0, 0, 0, 0, 0]))
    half.destroy()
    const garbage = net.connect(suite.proxy.port, '127.0.0.1')
    garbage.on('error', () => {})
    await new Promise(resolve => garbage.once('connect', resolve))
    garbage.write(Buffer.alloc(64, 0x5A))
    garbage.destroy()
    const nowhere = await FaultProxy.start('mongodb://127.0.0.1:1/')
    const lost = new MongoClient(nowhere.uri(), { serverSelectionTimeoutMS: 1_000 })
    await expect(lost.connect()).rejects.toThrow()
    await lost.close()
    await nowhere.close()
    expect(Object.keys(nowhere.upstreamErrors).length).toBeGreaterThan(0)
    const db = await through()
    await db.collection<Doc>('after_abuse').insertOne({ _id: 1 })
    expect(await stored('after_abuse', 1)).not.toBeNull()
  })
})

describe('close()', () => {
  it('ends a blocked request and every connection: the client fails instead of waiting', async () => {
    const own = await FaultProxy.start(mongoUri())
    const client = new MongoClient(own.uri(), { serverSelectionTimeoutMS: 10_000, retryWrites: false })
    suite.closes(client)
    await client.connect()
    own.fail({ commands: ['insert'], collection: 'closing', blockConnection: true, blockTimeMS: 60_000 })
    const pending = client.db(suite.direct.db.databaseName).collection<Doc>('closing').insertOne({ _id: 1 }).catch((e: unknown) => e)
    await eventually(async () => own.seen().some(c => c.collection === 'closing'))
    await own.close()
    expect(await pending).toBeInstanceOf(MongoNetworkError)
    expect(await stored('closing', 1)).toBeNull()
  })
})
