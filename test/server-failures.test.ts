import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MongoClient, type Db, type ObjectId } from 'mongodb'
import { WriteBuffer } from '../src/index.js'
import { mongoUri, openDb } from './helpers.js'
import { capabilities, server } from './support/capabilities.js'
import { FaultProxy, type FaultRule } from './support/fault-proxy.js'

// The failures a replica set answers and a standalone test server never gives, made on demand by
// the fault proxy (failCommand-shaped rules) in front of the suite's server, on every engine: a
// primary stepping down, shutdown, write concern errors, overload (MongoDB 8.x), a connection
// closed before or after the server applied the command. Each scenario follows a test of the
// driver specifications (named in its title: source/retryable-writes/tests/unified/<file>,
// source/client-backpressure/tests/<file>) and sends three kinds of writes through the buffer:
// inserts with generated _ids and `$set` upserts (retry-safe) and `$inc`s (not retry-safe).
// Whatever the scenario, each caller's outcome must match what the database holds afterwards:
// resolved ⇒ applied exactly once; rejected / not-sent ⇒ not applied; unknown ⇒ applied at most
// once. And no retry storm: the commands the buffer's collection sent stay under a bound.

const N = 10

let proxy: FaultProxy
let direct: { client: MongoClient, db: Db }
let client: MongoClient
let wb: WriteBuffer
/** whether the server is MongoDB (a refusal raised before execution then proves nothing was applied) */
let mongo = false
/** whether the driver resends a failed write by itself, exactly-once (MongoDB's replica sets: the buffer relies on it there) */
const resent = (): boolean => mongo && capabilities().replicaSet

beforeAll(async () => {
  direct = await openDb('server_failures')
  proxy = await FaultProxy.start(mongoUri())
  client = new MongoClient(proxy.uri(), { serverSelectionTimeoutMS: 20_000 })
  await client.connect()
  mongo = server().engine === 'mongodb'
  wb = new WriteBuffer(client.db(direct.db.databaseName), { maxTimeMS: 1_000, writeTimeoutMs: 0, retry: { maxAttempts: 4, baseDelayMs: 20 } })
})
afterAll(async () => {
  await wb.close()
  await client.close(true)
  await proxy.close()
  await direct.client.close()
})

type Outcome = 'ok' | 'rejected' | 'not-sent' | 'unknown'
interface Scenario {
  /** the specification test it follows */
  spec: string
  rule: Omit<FaultRule, 'commands' | 'collection'>
  /** what a retry-safe write is told */
  retrySafe: () => Outcome
  /** what an $inc may be told (more than one where it depends on the server being MongoDB) */
  inc: () => Outcome[]
  /** the most insert (or update) commands the buffer's collection may send for N writes of a kind */
  maxCommands: number
}

const LABEL = { retryableWrite: ['RetryableWriteError'], overload: ['RetryableError', 'SystemOverloadedError', 'NoWritesPerformed'] }

const scenarios: Record<string, Scenario> = {
  'NotWritablePrimary (10107), RetryableWriteError, before running': {
    spec: 'retryable-writes insertOne-errorLabels "InsertOne succeeds after NotWritablePrimary"',
    rule: { errorCode: 10107, errorLabels: LABEL.retryableWrite, times: 1 },
    retrySafe: () => 'ok',
    // MongoDB checks it before running the command: not applied, so even an $inc goes again
    inc: () => mongo ? ['ok'] : ['unknown'],
    maxCommands: 2,
  },
  'InterruptedDueToReplStateChange (11602) after the server applied the command': {
    spec: 'retryable-writes insertOne-errorLabels "InsertOne succeeds after InterruptedDueToReplStateChange" (the write applied, as a stepdown mid-command can)',
    rule: { errorCode: 11602, errorLabels: LABEL.retryableWrite, when: 'after', times: 1 },
    retrySafe: () => 'ok',
    inc: () => resent() ? ['ok'] : ['unknown'],
    maxCommands: 2,
  },
  'ShutdownInProgress (91), RetryableWriteError': {
    spec: 'retryable-writes insertOne-errorLabels "InsertOne succeeds after ShutdownInProgress"',
    rule: { errorCode: 91, errorLabels: LABEL.retryableWrite, times: 1 },
    retrySafe: () => 'ok',
    inc: () => resent() ? ['ok'] : ['unknown'],
    maxCommands: 2,
  },
  'a retryable write concern error (91) on an applied write': {
    spec: 'retryable-writes insertOne-serverErrors "InsertOne succeeds after retryable writeConcernError"',
    rule: { errorLabels: LABEL.retryableWrite, writeConcernError: { code: 91, errmsg: 'Replication is being shut down' }, times: 1 },
    // applied, not as durably as asked: every write is told unknown, none is applied twice
    retrySafe: () => resent() ? 'ok' : 'unknown',
    inc: () => resent() ? ['ok'] : ['unknown'],
    maxCommands: 1,
  },
  'WriteConcernFailed (64, wtimeout)': {
    spec: 'retryable-writes bulkWrite-serverErrors (writeConcernError on an applied write)',
    rule: { writeConcernError: { code: 64, codeName: 'WriteConcernFailed', errmsg: 'waiting for replication timed out', errInfo: { wtimeout: true } }, times: 1 },
    retrySafe: () => 'unknown',
    inc: () => ['unknown'],
    maxCommands: 1,
  },
  'UnsatisfiableWriteConcern (100)': {
    spec: 'retryable-writes insertOne-serverErrors (writeConcernError, not retryable)',
    rule: { writeConcernError: { code: 100, codeName: 'UnsatisfiableWriteConcern', errmsg: 'Not enough data-bearing nodes' }, times: 1 },
    retrySafe: () => 'unknown',
    inc: () => ['unknown'],
    maxCommands: 1,
  },
  'IngressRequestRateLimitExceeded (462), SystemOverloadedError + RetryableError + NoWritesPerformed, 3 times': {
    spec: 'client-backpressure backpressure-retry-loop "collection.insertOne retries using operation loop"',
    rule: { errorCode: 462, errorLabels: LABEL.overload, times: 3 },
    // the server's word that nothing was applied: every write goes again, an $inc too
    retrySafe: () => 'ok',
    inc: () => ['ok'],
    // the driver's own overload loop (maxAdaptiveRetries 2: 3 attempts), then one retry of the buffer's: never multiplied further
    maxCommands: 4,
  },
  'overload refusal 463, SystemOverloadedError + RetryableError + NoWritesPerformed': {
    spec: 'client-backpressure backpressure-retry-max-attempts',
    rule: { errorCode: 463, errorLabels: LABEL.overload, times: 1 },
    retrySafe: () => 'ok',
    inc: () => ['ok'],
    maxCommands: 2,
  },
  'InterruptedDueToOverload (473), SystemOverloadedError without RetryableError, after running': {
    spec: 'client-backpressure (InterruptedDueToOverload is not retryable by the driver)',
    rule: { errorCode: 473, errorLabels: ['SystemOverloadedError'], when: 'after', times: 1 },
    retrySafe: () => 'ok',
    inc: () => ['unknown'],
    maxCommands: 2,
  },
  'a connection closed before the server saw the command': {
    spec: 'retryable-writes insertOne-serverErrors (closeConnection)',
    rule: { closeConnection: true, times: 1 },
    retrySafe: () => 'ok',
    inc: () => resent() ? ['ok'] : ['unknown'],
    maxCommands: 2,
  },
  'a connection closed after the server applied the command': {
    spec: 'retryable-writes insertOne-serverErrors (closeConnection), the write applied',
    rule: { closeConnection: true, when: 'after', times: 1 },
    retrySafe: () => 'ok',
    inc: () => resent() ? ['ok'] : ['unknown'],
    maxCommands: 2,
  },
}

function outcomeOf (r: PromiseSettledResult<unknown>): Outcome {
  if (r.status === 'fulfilled') return 'ok'
  const outcome = (r.reason as { outcome?: unknown }).outcome
  if (outcome === 'rejected' || outcome === 'not-sent' || outcome === 'unknown') return outcome
  throw new Error(`a write buffer error without an outcome: ${String(r.reason)}`)
}

/** Whether `outcome` is true of a write whose effect `applied` times is in the database. */
function truthful (outcome: Outcome, applied: number): boolean {
  if (applied > 1) return false // never applied twice
  if (outcome === 'ok') return applied === 1
  if (outcome === 'rejected' || outcome === 'not-sent') return applied === 0
  return true // unknown: either
}

let serial = 0

describe(`each failure a replica set answers, made on demand: every caller told the truth, no retry storm (${process.env.FWB_ENGINE ?? 'suite server'})`, () => {
  for (const [name, s] of Object.entries(scenarios)) {
    it(`${name} [${s.spec}]`, async () => {
      const coll = `f${serial++}`
      await direct.db.collection<{ _id: string, n: number }>(coll).insertMany(Array.from({ length: N }, (_, i) => ({ _id: `i${i}`, n: 0 })))
      const c = wb.collection<{ _id?: string | ObjectId, n?: number, v?: number, k?: number }>(coll)
      const inserts = proxy.fail({ commands: ['insert'], collection: coll, ...s.rule })
      const updates = proxy.fail({ commands: ['update'], collection: coll, ...s.rule })
      const insertIds: unknown[] = []
      const [ins, sets, incs] = await Promise.all([
        Promise.allSettled(Array.from({ length: N }, (_, k) => c.insertOne({ k }).then(r => { insertIds[k] = r.insertedId; return r }))),
        // updates go in the same command: the rule fires on the first update command, whichever writes it carries
        Promise.allSettled(Array.from({ length: N }, (_, i) => c.updateOne({ _id: `s${i}` }, { $set: { v: 1 } }, { upsert: true }))),
        Promise.allSettled(Array.from({ length: N }, (_, i) => c.updateOne({ _id: `i${i}` }, { $inc: { n: 1 } }))),
      ])
      inserts.off()
      updates.off()
      expect(inserts.fired + updates.fired, 'the fault fired').toBeGreaterThan(0)
      const docs = await direct.db.collection<{ _id: unknown, n?: number, v?: number, k?: number }>(coll).find().toArray()
      const lies: string[] = []
      for (let k = 0; k < N; k++) {
        const o = outcomeOf(ins[k] as PromiseSettledResult<unknown>)
        const applied = docs.filter(d => d.k === k).length
        if (!truthful(o, applied)) lies.push(`insert k=${k}: told ${o}, stored ${applied} time(s)`)
        if (o !== s.retrySafe()) lies.push(`insert k=${k}: told ${o}, expected ${s.retrySafe()}`)
        const so = outcomeOf(sets[k] as PromiseSettledResult<unknown>)
        const set = docs.find(d => d._id === `s${k}`)
        if (!truthful(so, set?.v === 1 ? 1 : 0)) lies.push(`$set s${k}: told ${so}, stored ${JSON.stringify(set)}`)
        if (so !== s.retrySafe()) lies.push(`$set s${k}: told ${so}, expected ${s.retrySafe()}`)
        const io = outcomeOf(incs[k] as PromiseSettledResult<unknown>)
        const n = docs.find(d => d._id === `i${k}`)?.n ?? -1
        if (!truthful(io, n)) lies.push(`$inc i${k}: told ${io}, n=${n}`)
        if (!s.inc().includes(io)) lies.push(`$inc i${k}: told ${io}, expected one of ${s.inc().join(', ')}`)
      }
      expect(lies.slice(0, 8), `${lies.length} wrong (${server().name} ${server().version}, replica set: ${String(capabilities().replicaSet)})`).toEqual([])
      const sent = proxy.seen().filter(cmd => cmd.collection === coll)
      for (const kind of ['insert', 'update']) {
        expect(sent.filter(cmd => cmd.name === kind).length, `${kind} commands sent`).toBeLessThanOrEqual(s.maxCommands * (kind === 'update' ? 2 : 1))
      }
    }, 60_000)
  }
})
