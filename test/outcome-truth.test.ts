import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MongoClient, type AnyBulkWriteOperation, type Db, type Document } from 'mongodb'
import { WriteBuffer } from '../src/index.js'
import { FaultProxy, hostPortOf } from './support/fault-proxy.js'
import { Ledger } from './support/ledger.js'
import { PrivateServer, privateServerUnavailable } from './support/private-ferret.js'
import { mongoUri, openDb } from './helpers.js'

/**
 * Issue 21: a caller's `outcome` never lies, and one bad write never fails the rest of its batch.
 * Each case puts one bad write (or one server fault) among good ones and compares what every
 * caller was told with what the database holds.
 */

const GOOD = 50
const NUL = '\0'
/** private servers: ports of this file's own (FerretDB, PostgreSQL) */
const FERRET_PORTS: [number, number] = [27160, 27199]
// below the kernel's ephemeral range (32768-60999 on Linux): a port in it can be taken by any
// outgoing connection meanwhile, and PostgreSQL restarted on it fails "Address already in use"
const PG_PORTS: [number, number] = [26160, 26199]

let client: MongoClient
let db: Db

beforeAll(async () => { ({ client, db } = await openDb('outcome_truth')) })
afterAll(async () => { await client?.close() })

type Settled = PromiseSettledResult<unknown>
interface Told { code?: unknown, outcome?: unknown, message?: string, name?: string }

function reasonOf (s: Settled | undefined): Told {
  expect(s?.status).toBe('rejected')
  return (s as PromiseRejectedResult).reason as Told
}

function expectAllFulfilled (results: Settled[]): void {
  const failed = results.filter(r => r.status === 'rejected').map(r => String((r as PromiseRejectedResult).reason))
  expect(failed).toEqual([])
}

/** Whether the server is MongoDB itself (what the buffer trusts a whole-command refusal from). */
async function serverIsMongoDB (): Promise<boolean> {
  const info = await db.command({ buildInfo: 1 })
  if (Object.keys(info).some(k => k.toLowerCase().startsWith('ferretdb'))) return false
  return typeof info.gitVersion === 'string' && /^[0-9a-f]{40}$/.test(info.gitVersion)
}

describe('1. an unsendable write among 50 good ones is refused alone', () => {
  /** 50 inserts, or 50 `$set`-by-_id updates on documents that exist, queued in the tick of `bad`. */
  async function amidGood (name: string, kind: 'insert' | 'update', bad: (wb: WriteBuffer) => Promise<unknown>): Promise<Told> {
    const coll = db.collection<Document>(name)
    if (kind === 'update') await coll.insertMany(Array.from({ length: GOOD }, (_, i) => ({ _id: i as never, v: 0 })))
    const wb = new WriteBuffer(db, { lingerMs: 20 })
    const c = wb.collection(name)
    const good = Array.from({ length: GOOD }, (_, i) => kind === 'insert'
      ? c.insertOne({ _id: i as never, v: 1 })
      : c.updateOne({ _id: i }, { $set: { v: 1 } }))
    const badWrite = bad(wb)
    const all = await Promise.allSettled([...good, badWrite])
    const settled = all.slice(0, GOOD)
    const badSettled = all[GOOD]
    await wb.close()
    expectAllFulfilled(settled)
    expect(await coll.countDocuments({ v: 1 })).toBe(GOOD)
    return reasonOf(badSettled)
  }

  function expectInvalid (err: Told, message: RegExp): void {
    expect(err.name).toBe('InvalidWriteError')
    expect(err.code).toBe('WRITE_BUFFER_INVALID_WRITE')
    expect(err.outcome).toBe('not-sent')
    expect(err.message).toMatch(message)
  }

  it('a NUL byte in a document key (nested): the insert refused naming the path, the 50 stored', async () => {
    const err = await amidGood('nul_doc_key', 'insert', wb => wb.collection('nul_doc_key').insertOne({ _id: 'bad' as never, inner: { 'a\0b': 1 } }))
    expectInvalid(err, /NUL byte/)
    expect(err.message).toMatch(/inner/)
    expect(await db.collection('nul_doc_key').countDocuments({ _id: 'bad' as never })).toBe(0)
  })

  it('a NUL byte in a $set key: the update refused naming the path, the 50 stored', async () => {
    const err = await amidGood('nul_set_key', 'update', wb => wb.collection('nul_set_key').updateOne({ _id: 0 }, { $set: { 'w\0x': 1 } }))
    expectInvalid(err, /NUL byte/)
    expect(err.message).toMatch(/\$set/)
  })

  it('a NUL byte in a filter key: the update refused naming the key, the 50 stored', async () => {
    const err = await amidGood('nul_filter_key', 'update', wb => wb.collection('nul_filter_key').updateOne({ 'f\0g': 1 }, { $set: { v: 2 } }))
    expectInvalid(err, /NUL byte/)
    expect(err.message).toMatch(/f\\u0000g/)
  })

  it('a NUL byte in a RegExp pattern: the update refused naming the field, the 50 stored', async () => {
    const err = await amidGood('nul_regexp', 'update', wb => wb.collection('nul_regexp').updateOne({ name: new RegExp(`a${NUL}b`) }, { $set: { v: 2 } }))
    expectInvalid(err, /regular expression/)
    expect(err.message).toMatch(/name/)
  })

  it('an unknown update operator ($foo): refused at submit, the 50 stored and nothing else changed', async () => {
    const err = await amidGood('unknown_op', 'update', wb => wb.collection('unknown_op').updateOne({ _id: 0 }, { $foo: { v: 9 } } as never))
    expectInvalid(err, /\$foo/)
    expect(await db.collection('unknown_op').countDocuments({ v: 9 })).toBe(0)
  })

  it("a non-numeric $inc operand ($inc: 'x'): refused at submit, the 50 stored", async () => {
    const err = await amidGood('inc_string', 'update', wb => wb.collection('inc_string').updateOne({ _id: 1 }, { $inc: { n: 'x' } } as never))
    expectInvalid(err, /\$inc/)
    expect(await db.collection('inc_string').countDocuments({ n: { $exists: true } })).toBe(0)
  })

  it('a document changed after insertOne() returned (a NUL key added in the same tick): that insert alone refused, not-sent, naming the field', async () => {
    const err = await amidGood('changed_after', 'insert', wb => {
      const doc: Document = { _id: 'late', v: 3 }
      const p = wb.collection('changed_after').insertOne(doc)
      doc['late\0key'] = 1 // after submit, before the batch is sent
      return p
    })
    expect(err.code).toBe('WRITE_BUFFER_INVALID_WRITE')
    expect(err.outcome).toBe('not-sent')
    expect(err.message).toMatch(/late\\u0000key/)
    expect(await db.collection('changed_after').countDocuments({ _id: 'late' as never })).toBe(0)
  })

  // the driver's serializer runs the caller's code, which throws its own errors, not a BSONError
  it('a getter that throws only at send time (armed after insertOne() returned): that insert alone refused, not-sent, naming the error', async () => {
    const err = await amidGood('armed_getter', 'insert', wb => {
      let armed = false
      const doc: Document = { _id: 'late', v: 3 }
      Object.defineProperty(doc, 'g', { enumerable: true, get () { if (armed) throw new Error('getter armed'); return 1 } })
      const p = wb.collection('armed_getter').insertOne(doc)
      armed = true
      return p
    })
    expect(err.code).toBe('WRITE_BUFFER_INVALID_WRITE')
    expect(err.outcome).toBe('not-sent')
    expect(err.message).toMatch(/getter armed/)
    expect(await db.collection('armed_getter').countDocuments({ _id: 'late' as never })).toBe(0)
  })

  it('a Map given a number key after updateOne() returned (Node throws a TypeError while serializing): that update alone refused, not-sent', async () => {
    const err = await amidGood('map_number_key', 'update', wb => {
      const set: Document = { v: 9 }
      const p = wb.collection('map_number_key').updateOne({ _id: 'late' }, { $set: set }, { upsert: true })
      set.m = new Map([[1, 'x']])
      return p
    })
    expect(err.code).toBe('WRITE_BUFFER_INVALID_WRITE')
    expect(err.outcome).toBe('not-sent')
    expect(await db.collection('map_number_key').countDocuments({ v: 9 })).toBe(0)
  })
})

describe('2. a write the server refuses as a whole command fails alone', () => {
  /**
   * Probe: the bad write with one good one, straight through the driver. The capability is
   * shown when the command fails without per-statement errors and the good write was not applied.
   */
  async function refusesWhole (name: string, bad: AnyBulkWriteOperation): Promise<{ code: number } | undefined> {
    const coll = db.collection<Document>(`${name}_probe`)
    await coll.insertMany([{ _id: 0 as never, v: 0 }, { _id: 1 as never, v: 0 }])
    try {
      await coll.bulkWrite([bad, { updateOne: { filter: { _id: 1 as never }, update: { $set: { v: 1 } } } }], { ordered: false })
      return undefined
    } catch (err) {
      const e = err as { code?: unknown, writeErrors?: unknown[] }
      const perStatement = Array.isArray(e.writeErrors) && e.writeErrors.length > 0
      const goodApplied = (await coll.findOne({ _id: 1 as never }))?.v === 1
      return !perStatement && !goodApplied && typeof e.code === 'number' ? { code: e.code } : undefined
    }
  }

  async function amid50 (name: string, bad: (c: ReturnType<WriteBuffer['collection']>) => Promise<unknown>): Promise<Told> {
    const coll = db.collection<Document>(name)
    await coll.insertMany(Array.from({ length: GOOD + 1 }, (_, i) => ({ _id: i as never, v: 0 })))
    const wb = new WriteBuffer(db, { lingerMs: 20, maxTimeMS: 1_000 })
    const c = wb.collection(name)
    const good = Array.from({ length: GOOD }, (_, i) => c.updateOne({ _id: i }, { $set: { v: 1 } }))
    const badWrite = bad(c)
    const all = await Promise.allSettled([...good, badWrite])
    const settled = all.slice(0, GOOD)
    const badSettled = all[GOOD]
    await wb.close()
    expectAllFulfilled(settled)
    expect(await coll.countDocuments({ v: 1 })).toBe(GOOD)
    expect((await coll.findOne({ _id: GOOD as never }))?.v).toBe(0)
    return reasonOf(badSettled)
  }

  it('a pipeline update among 50 `$set` updates', async ({ skip }) => {
    const shown = await refusesWhole('pipeline', { updateOne: { filter: { _id: 0 as never }, update: [{ $set: { v: 1 } }] } })
    if (shown === undefined) skip('server refuses pipeline updates as a whole command: no')
    const err = await amid50('pipeline', c => c.updateOne({ _id: GOOD as never }, [{ $set: { v: 1 } }]))
    expect(err.code).toBe(shown!.code) // the server's code, kept
    expect(err.outcome).toBe(await serverIsMongoDB() ? 'rejected' : 'unknown')
  })

  it('an update with a collation among 50 `$set` updates', async ({ skip }) => {
    const shown = await refusesWhole('collation', { updateOne: { filter: { _id: 0 as never }, update: { $set: { v: 1 } }, collation: { locale: 'en' } } })
    if (shown === undefined) skip('server refuses an update command with a collation as a whole: no')
    const err = await amid50('collation', c => c.updateOne({ _id: GOOD as never }, { $set: { v: 1 } }, { collation: { locale: 'en' } }))
    expect(err.code).toBe(shown!.code)
    expect(err.outcome).toBe(await serverIsMongoDB() ? 'rejected' : 'unknown')
  })
})

/** The bytes of an OP_MSG `update` command on `collection` (its first key and value). */
function isUpdateOn (collection: string): (chunk: Buffer) => boolean {
  const needle = Buffer.concat([Buffer.from('\x02update\x00'), Buffer.alloc(4), Buffer.from(collection + '\x00')])
  return chunk => {
    const i = chunk.indexOf(needle.subarray(0, 8))
    return i >= 0 && chunk.subarray(i + 12, i + 12 + collection.length + 1).equals(needle.subarray(12))
  }
}

const target = hostPortOf(mongoUri())

describe('6. write errors of an update command tell the truth, whatever index the server gives them', () => {
  // FerretDB 1.24 stops an update command at its failing statement (3 here) and reports the
  // error as statement 0, ok: 1: trusted by index, _id 0 was told rejected though applied, 4-5
  // told applied though never run, and an ordered collection resent 1-2 ($inc applied 2-3 times)
  for (const ordered of [false, true]) {
    it(`six $inc, one of a string field (${ordered ? 'ordered' : 'unordered'} collection): no caller told what the database contradicts`, async () => {
      const name = `inc_index_${String(ordered)}`
      await db.collection(name).insertMany([0, 1, 2, 3, 4, 5].map(i => ({ _id: i as never, n: i === 3 ? 'str' : 0 })))
      const wb = new WriteBuffer(db)
      const c = wb.collection(name, { ordered })
      const told = await Promise.allSettled([0, 1, 2, 3, 4, 5].map(i => c.updateOne({ _id: i }, { $inc: { n: 1 } })))
      await wb.close()
      const docs = await db.collection(name).find().sort({ _id: 1 }).toArray()
      for (let i = 0; i < 6; i++) {
        const n: unknown = docs[i]?.n
        const t = told[i] as Settled
        if (t.status === 'fulfilled') expect({ i, n }).toEqual({ i, n: 1 })
        else if (reasonOf(t).outcome === 'rejected') expect({ i, n }).toEqual({ i, n: i === 3 ? 'str' : 0 })
        else expect(reasonOf(t).outcome).toBe('unknown')
        expect({ i, n }).not.toEqual({ i, n: 2 }) // never applied twice
        // the server's code only where it is proven this write's (an app may map 14 to a 4xx)
        if (t.status === 'rejected' && i !== 3) expect({ i, code: reasonOf(t).code }).not.toEqual({ i, code: 14 })
      }
      expect(docs[3]?.n).toBe('str')
      expect(told[3]?.status).toBe('rejected')
    })
  }
})

describe.skipIf(target === undefined)('5. a resend must not reach another document', () => {
  let proxy: FaultProxy
  let proxied: MongoClient
  let pdb: Db
  const updates = new Map<string, number>()

  beforeAll(async () => {
    proxy = await FaultProxy.start(target!.host, target!.port)
    proxied = new MongoClient(proxy.uri(mongoUri()), { socketTimeoutMS: 300, serverSelectionTimeoutMS: 3_000, retryWrites: false, monitorCommands: true })
    proxied.on('commandStarted', ev => {
      if (ev.commandName === 'update') {
        const coll = String((ev.command as { update?: unknown }).update)
        updates.set(coll, (updates.get(coll) ?? 0) + 1)
      }
    })
    await proxied.connect()
    pdb = proxied.db(db.databaseName)
  })
  afterAll(async () => {
    await proxied?.close()
    await proxy?.close()
  })

  /** An updateOne on a non-_id filter that matches 3 documents; its reply held past the socket timeout (the server applied it). */
  async function ambiguous (name: string, options: { uniqueFilter?: boolean }): Promise<{ settled: Settled, sent: number, touched: number }> {
    await db.collection<Document>(name).insertMany([0, 1, 2].map(i => ({ _id: i as never, group: 'g', n: 0 })))
    const wb = new WriteBuffer(pdb, { maxTimeMS: 300, lingerMs: 0, retry: { maxAttempts: 3, baseDelayMs: 20, maxDelayMs: 100 } })
    proxy.holdMatching({ match: isUpdateOn(name), holdMs: 800, direction: 'reply' })
    const settled = (await Promise.allSettled([wb.collection(name).updateOne({ group: 'g' }, { $set: { claimed: true } }, options as never)]))[0] as Settled
    await wb.close()
    const touched = await db.collection(name).countDocuments({ claimed: true })
    return { settled, sent: updates.get(name) ?? 0, touched }
  }

  it('an updateOne whose filter is not _id is not resent after an ambiguous failure: told unknown', async () => {
    const { settled, sent, touched } = await ambiguous('resend_plain', {})
    expect(proxy.held).toBeGreaterThan(0)
    expect(reasonOf(settled).outcome).toBe('unknown')
    expect(sent).toBe(1)
    expect(touched).toBe(1) // the first attempt was applied
  })

  it('with uniqueFilter: true it is resent and acknowledged', async () => {
    const { settled, sent, touched } = await ambiguous('resend_unique', { uniqueFilter: true })
    expect(settled.status).toBe('fulfilled')
    expect(sent).toBe(2)
    expect(touched).toBeGreaterThanOrEqual(1)
  })
})

const noPrivate = privateServerUnavailable()

describe.skipIf(noPrivate !== undefined)('3-4. a private FerretDB 1.24 on PostgreSQL, paused and starved of its storage', () => {
  /** dev-db.sh's settings (fast: 100 updates answered inside the socket timeout); durable for the storage outage */
  let server: PrivateServer
  let direct: MongoClient
  let ddb: Db

  beforeAll(async () => {
    server = await PrivateServer.start({ ferretPorts: FERRET_PORTS, pgPorts: PG_PORTS, durable: false })
    direct = new MongoClient(server.uri, { serverSelectionTimeoutMS: 20_000 })
    await direct.connect()
    ddb = direct.db('fwb_outcome_truth_private')
  })
  afterAll(async () => {
    server?.resume()
    await direct?.close()
    await server?.stop()
  })

  it('3. paused past the fence (SIGSTOP 7.5 s, socketTimeoutMS 4000, maxTimeMS 2000): no document ends older than its last acknowledged write', async () => {
    // 100, not the 200: FerretDB works off the held attempts at ~100 statements/s on a
    // loaded 2-core machine, and must finish them inside the fence (it ignores maxTimeMS, above)
    const DOCS = 100
    // The run: socket timeout 300 ms, maxTimeMS 1 s, paused 2.8 s. Here both are longer:
    // the socket timeout so that a `$set v:2` batch sent while the server works off the held
    // attempts is still answered on a loaded machine (with 2 s, none was before the fix: the test
    // then proved nothing), and maxTimeMS because FerretDB 1.24 ignores
    // it on update commands (update_params.go: `maxTimeMS,ignored`): the held attempts must end
    // inside the fence by themselves. The pause still outlasts a fence of maxTimeMS + 1 s from the failure.
    const SOCKET_TIMEOUT_MS = 4_000
    const MAX_TIME_MS = 2_000
    const PAUSE_MS = SOCKET_TIMEOUT_MS + MAX_TIME_MS + 1_000 + 500
    const name = 'paused'
    await ddb.collection<Document>(name).insertMany(Array.from({ length: DOCS }, (_, k) => ({ _id: k as never, v: 0 })))
    const IN_FLIGHT = 20
    // connections made before the pause (a paused server would not answer a handshake); a write
    // that still needs one fails its connect (not sent) rather than waiting for the resume
    const paused = new MongoClient(server.uri, {
      socketTimeoutMS: SOCKET_TIMEOUT_MS, connectTimeoutMS: SOCKET_TIMEOUT_MS, minPoolSize: IN_FLIGHT, serverSelectionTimeoutMS: 5_000, retryWrites: false,
    })
    let ready = 0
    paused.on('connectionReady', () => { ready++ })
    await paused.connect()
    // batches of 10 on 20 connections: FerretDB 1.24 runs an update command statement by statement,
    // and a batch must be answered inside the socket timeout once the server runs again
    const wb = new WriteBuffer(paused.db(ddb.databaseName), { maxTimeMS: MAX_TIME_MS, coalesce: false, maxBatchSize: 10, maxInFlight: IN_FLIGHT, retry: { maxAttempts: 1 } })
    const docs = wb.collection(name)
    try {
      for (let i = 0; i < 50; i++) {
        if (ready >= IN_FLIGHT) break
        await new Promise(resolve => setTimeout(resolve, 50))
      }
      server.pause()
      // resumed on time whatever the writes do meanwhile
      const resumed = new Promise<void>(resolve => setTimeout(() => { server.resume(); resolve() }, PAUSE_MS))
      // the server stamps when it applied each first attempt
      const first = await Promise.allSettled(Array.from({ length: DOCS }, (_, k) => docs.updateOne({ _id: k }, { $set: { v: 1 }, $currentDate: { v1At: true } })))
      await resumed
      const resumedAt = Date.now()
      const second = await Promise.allSettled(Array.from({ length: DOCS }, (_, k) => docs.updateOne({ _id: k }, { $set: { v: 2 } })))
      await wb.close()
      // let any attempt still held by the server land before looking
      await new Promise(resolve => setTimeout(resolve, 1_500))
      const docsNow = await ddb.collection<{ _id: number, v: number, v1At?: Date }>(name).find().toArray()
      const final = new Map(docsNow.map(d => [d._id, d.v]))
      const v1At = new Map(docsNow.map(d => [d._id, d.v1At?.getTime() ?? 0]))
      const firstTold = first.map(r => r.status === 'fulfilled' ? 'acknowledged' : String((r.reason as Told).outcome))
      const acked2 = second.flatMap((r, k) => r.status === 'fulfilled' ? [k] : [])
      const older = acked2.filter(k => final.get(k) !== 2)
      // FerretDB 1.24 ignores maxTimeMS on update commands: a held attempt it applied later than
      // maxTimeMS + 1 s after it could read it again ran longer than MongoDB would let it. The fence
      // cannot cover that (and need not on MongoDB): such documents are reported, not counted.
      const window = MAX_TIME_MS + 1_000
      const pastMaxTime = older.filter(k => (v1At.get(k) ?? 0) > resumedAt + window)
      const overtaken = older.filter(k => (v1At.get(k) ?? 0) <= resumedAt + window)
      console.error(`[paused] connections before the pause: ${ready}; first attempts: ${JSON.stringify(count(firstTold))}; ` +
        `v:2 acknowledged ${acked2.length}/${DOCS}; ended older than v:2: ${older.length} ` +
        `(${overtaken.length} by an attempt applied within maxTimeMS + 1 s of the resume, ${pastMaxTime.length} later: ` +
        `${pastMaxTime.map(k => (v1At.get(k) ?? 0) - resumedAt).join(', ')} ms after the resume)`)
      expect(firstTold.filter(t => t === 'unknown').length).toBeGreaterThan(0) // the pause did make them ambiguous
      expect(acked2.length).toBeGreaterThan(0)
      expect(overtaken).toEqual([])
      expect(pastMaxTime.length).toBeLessThan(DOCS / 10) // a run this slow proves nothing either way
    } finally {
      server.resume()
      await wb.close()
      await paused.close()
    }
  }, 30_000)

  it('4. PostgreSQL stopped (immediate) under 2,800 concurrent writes, durable settings: nothing told rejected/not-sent was applied, nothing resolved lost', async () => {
    const INSERTS = 2_000
    const INCS = 400
    const COUNTERS = 20
    await server.setDurable(true)
    const ins = ddb.collection<{ _id: number }>('storage_ins')
    const ctr = ddb.collection<{ _id: number, n: number }>('storage_ctr')
    await ctr.insertMany(Array.from({ length: COUNTERS }, (_, c) => ({ _id: c, n: 0 })))
    const storage = new MongoClient(server.uri, { serverSelectionTimeoutMS: 5_000, socketTimeoutMS: 10_000, retryWrites: false })
    await storage.connect()
    const wb = new WriteBuffer(storage.db(ddb.databaseName), {
      maxTimeMS: 2_000, maxBatchSize: 100, writeTimeoutMs: 15_000, retry: { maxAttempts: 40, baseDelayMs: 50, maxDelayMs: 400 },
    })
    const ledger = new Ledger()
    const incTold: Array<{ counter: number, ok: boolean, outcome?: unknown, message?: string }> = []
    const tracked: Array<Promise<void>> = []
    const WAVES = 24
    const perWave = (INSERTS + INCS) / WAVES
    let marker = 0
    let inc = 0
    let outage: Promise<void> | undefined
    try {
      for (let w = 0; w < WAVES; w++) {
        for (let i = 0; i < perWave; i++) {
          if ((marker + inc) % 6 === 5 && inc < INCS) {
            const counter = inc++ % COUNTERS
            tracked.push(wb.collection('storage_ctr').updateOne({ _id: counter }, { $inc: { n: 1 } }).then(
              () => { incTold.push({ counter, ok: true }) },
              (err: Told) => { incTold.push({ counter, ok: false, outcome: err.outcome, message: err.message }) }))
          } else {
            const m = marker++
            tracked.push(ledger.track(m, wb.collection('storage_ins').insertOne({ _id: m })))
          }
        }
        if (w === 14) {
          // the storage goes away mid-run, as after a crash, and comes back a second later
          outage = (async () => {
            await server.stopPgImmediate()
            await new Promise(resolve => setTimeout(resolve, 1_000))
            await server.startPg()
          })()
        }
        await new Promise(resolve => setTimeout(resolve, 25))
      }
      await outage
      // and writes after the storage is back: these must be applied
      for (let i = 0; i < 200; i++) {
        const counter = inc++ % COUNTERS
        tracked.push(wb.collection('storage_ctr').updateOne({ _id: counter }, { $inc: { n: 1 } }).then(
          () => { incTold.push({ counter, ok: true }) },
          (err: Told) => { incTold.push({ counter, ok: false, outcome: err.outcome, message: err.message }) }))
        const m = marker++
        tracked.push(ledger.track(m, wb.collection('storage_ins').insertOne({ _id: m })))
      }
      await Promise.all(tracked)
      await wb.close()
    } finally {
      await outage?.catch(() => {})
      await wb.close()
      await storage.close()
    }
    const present = new Map<number, number>()
    for (const d of await ins.find({}, { projection: { _id: 1 } }).toArray()) present.set(d._id, 1)
    const audit = ledger.audit(present)
    const incs = count(incTold.map(t => t.ok ? 'acknowledged' : String(t.outcome)))
    console.error(`[storage] inserts: ${JSON.stringify(audit)} told: ${JSON.stringify(count(ledger.told.map(t => t.ok ? 'acknowledged' : String(t.outcome))))}; $inc told: ${JSON.stringify(incs)} ${JSON.stringify(count(incTold.flatMap(t => t.message === undefined ? [] : [t.message.slice(0, 160)])))}`)
    expect(ledger.unsettled).toBe(0)
    expect(ledger.told.length).toBe(marker) // each settled once
    expect(incTold.length).toBe(inc)
    expect(audit.phantom).toBe(0) // told rejected / not-sent, yet stored
    expect(audit.lost).toBe(0) // resolved, yet absent
    expect(audit.duplicated).toBe(0)
    const outOfRange: string[] = []
    for (const c of await ctr.find().toArray()) {
      const mine = incTold.filter(t => t.counter === c._id)
      const resolved = mine.filter(t => t.ok).length
      const unknown = mine.filter(t => !t.ok && t.outcome === 'unknown').length
      if (c.n < resolved || c.n > resolved + unknown) outOfRange.push(`counter ${c._id}: n=${c.n}, resolved ${resolved}, unknown ${unknown}`)
    }
    expect(outOfRange).toEqual([])
  }, 60_000)
})

function count (xs: string[]): Record<string, number> {
  const out: Record<string, number> = {}
  for (const x of xs) out[x] = (out[x] ?? 0) + 1
  return out
}
