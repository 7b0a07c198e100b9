import { EventEmitter } from 'node:events'
import { describe, expect, it } from 'vitest'
import type { Db } from 'mongodb'
import { WriteBuffer, type WriteBufferOptions } from '../../src/index.js'

/** A Db whose bulkWrite answers with `answer(models, call#)`; records models and options of each call. */
function fakeDb (answer: (models: Array<Record<string, unknown>>, n: number) => unknown) {
  const calls: Array<{ kinds: string[], options: Record<string, unknown> }> = []
  const db = {
    collection: (name: string) => ({
      collectionName: name,
      bulkWrite: async (models: Array<Record<string, unknown>>, options: Record<string, unknown>) => {
        calls.push({ kinds: models.map(m => Object.keys(m)[0] as string), options })
        const out = answer(models, calls.length)
        if (out instanceof Error) throw out
        return out
      },
      find: () => ({ toArray: async () => [] }),
    }),
    // MongoDB itself: its whole-command refusals of the codes raised before execution prove nothing was applied
    command: async () => ({ version: '8.0.4', gitVersion: 'bc35ab4305d9920d9d0491c1c9ef9b72383d31f9', allocator: 'tcmalloc', ok: 1 }),
  } as unknown as Db
  return { db, calls }
}

const ok = { upsertedIds: {} }
function named (name: string, fields: object = {}): Error {
  const err = Object.assign(new Error(name), fields)
  Object.defineProperty(err, 'name', { value: name })
  return err
}
function outcomeOf (r: PromiseSettledResult<unknown>): string {
  return r.status === 'fulfilled' ? 'acknowledged' : `${String((r.reason as { code?: unknown }).code)}/${String((r.reason as { outcome?: unknown }).outcome)}`
}
const quick: WriteBufferOptions = { retry: { baseDelayMs: 1, maxAttempts: 3 }, maxTimeMS: 1 }

describe('the driver\'s rules', () => {
  it('every bulkWrite carries maxTimeMS', async () => {
    const { db, calls } = fakeDb(() => ok)
    const wb = new WriteBuffer(db, { maxTimeMS: 1234 })
    await wb.collection('c').insertOne({ a: 1 })
    expect(calls[0]?.options).toMatchObject({ ordered: false, maxTimeMS: 1234 })
  })

  it('updateMany and deleteMany travel in bulkWrites of their own (they would disable retryable writes for the rest)', async () => {
    const { db, calls } = fakeDb(() => ok)
    const c = new WriteBuffer(db).collection('c')
    await Promise.all([
      c.updateOne({ _id: 1 }, { $set: { a: 1 } }),
      c.updateMany({ kind: 'x' }, { $set: { b: 1 } }),
      c.replaceOne({ _id: 2 }, { a: 2 }),
      c.deleteOne({ _id: 3 }),
      c.deleteMany({ kind: 'y' }),
    ])
    const groups = calls.map(call => [...new Set(call.kinds)].sort().join('+')).sort()
    expect(groups).toEqual(['deleteMany', 'deleteOne', 'replaceOne+updateOne', 'updateMany'])
  })

  it('a command refused with ok: 0 (reported by the driver as a write error at index 0) fails the whole batch, not its first write', async () => {
    // the driver's mergeBatchResults: { ok: 0 } → writeErrors [{ index 0, code }] and result.ok 0
    const refusal = named('MongoBulkWriteError', { code: 13, writeErrors: [{ index: 0, code: 13, errmsg: 'not authorized' }], result: { ok: 0 } })
    const { db } = fakeDb(() => refusal)
    const c = new WriteBuffer(db, quick).collection('c')
    const results = await Promise.allSettled([c.insertOne({ a: 1 }), c.insertOne({ a: 2 }), c.insertOne({ a: 3 })])
    // not "first rejected with 13, the others acknowledged": none of them was written
    expect(results.map(outcomeOf)).toEqual(Array(3).fill('WRITE_BUFFER_BATCH_FAILED/rejected'))
  })

  it('an isolation whose halves fail otherwise, each differently: each half is judged by its own failure (review: both were judged by the first, a $inc cut mid-command was resent as not-sent)', async () => {
    const { db, calls } = fakeDb((models, n) => {
      // the whole command: refused by MongoDB before running (BadValue), then split in halves
      if (n === 1) throw named('MongoServerError', { code: 2, errorResponse: { ok: 0, code: 2 } })
      if (n === 2) throw named('MongoServerSelectionError') // first half: never sent, sent again
      if (n === 3) throw named('MongoNetworkError') // second half: cut while on the wire: maybe applied
      return ok
    })
    const wb = new WriteBuffer(db, quick)
    const c = wb.collection('c')
    const results = await Promise.allSettled([0, 1, 2, 3].map(i => c.updateOne({ _id: i }, { $inc: { n: 1 } }, { upsert: true })))
    expect(results.map(outcomeOf)).toEqual(['acknowledged', 'acknowledged', 'WRITE_BUFFER_BATCH_FAILED/unknown', 'WRITE_BUFFER_BATCH_FAILED/unknown'])
    expect(calls.length).toBe(4) // the first half once more; the second never again
    await wb.close()
  })

  it('a real write error at index 0 (result ok 1) rejects only that write', async () => {
    const dup = named('MongoBulkWriteError', { code: 11000, writeErrors: [{ index: 0, code: 11000, errmsg: 'dup' }], result: { ok: 1 } })
    const { db } = fakeDb(() => dup)
    const c = new WriteBuffer(db, quick).collection('c')
    const results = await Promise.allSettled([c.insertOne({ _id: 1 }), c.insertOne({ _id: 2 })])
    expect(results.map(outcomeOf)).toEqual(['11000/rejected', 'acknowledged'])
  })

  it('MongoDB 8 overload (code 462, SystemOverloadedError): not applied, retried with backoff', async () => {
    const overload = named('MongoServerError', { code: 462, errorResponse: { ok: 0 }, hasErrorLabel: (l: string) => l === 'SystemOverloadedError' || l === 'RetryableError' })
    const { db, calls } = fakeDb((_m, n) => n === 1 ? overload : ok)
    const wb = new WriteBuffer(db, quick)
    // an $inc is not retry-safe after an unknown outcome: retried here only because 462 means "not applied"
    await expect(wb.collection('c').updateOne({ _id: 1 }, { $inc: { n: 1 } })).resolves.toEqual({})
    expect(calls).toHaveLength(2)
    expect(wb.stats().retries).toBe(1)
  })

  it('an overload interruption (473 InterruptedDueToOverload, SystemOverloadedError without RetryableError) comes mid-command: unknown, only a retry-safe write goes again', async () => {
    const interrupted = named('MongoServerError', { code: 473, errorResponse: { ok: 0 }, hasErrorLabel: (l: string) => l === 'SystemOverloadedError' })
    const { db, calls } = fakeDb((_m, n) => n === 1 ? interrupted : ok)
    const wb = new WriteBuffer(db, quick)
    const results = await Promise.allSettled([wb.collection('c').updateOne({ _id: 1 }, { $inc: { n: 1 } })])
    expect(results.map(outcomeOf)).toEqual(['WRITE_BUFFER_BATCH_FAILED/unknown'])
    expect(calls).toHaveLength(1) // the $inc was not resent: the interrupted attempt may have applied it
    const again = fakeDb((_m, n) => n === 1 ? interrupted : ok)
    await expect(new WriteBuffer(again.db, quick).collection('c').updateOne({ _id: 1 }, { $set: { v: 1 } })).resolves.toEqual({})
    expect(again.calls).toHaveLength(2)
  })

  it('on a replica set, a 462 may answer the driver\'s own retry of an attempt that was applied: unknown, an $inc not re-sent', async () => {
    const overload = named('MongoServerError', { code: 462, errorResponse: { ok: 0 }, hasErrorLabel: (l: string) => l === 'SystemOverloadedError' || l === 'RetryableError' })
    const { db, calls } = fakeDb((_m, n) => n === 1 ? overload : ok)
    Object.assign(db, { client: { options: {}, topology: { description: { servers: new Map([['a', { type: 'RSPrimary' }]]) } } } })
    const results = await Promise.allSettled([new WriteBuffer(db, quick).collection('c').updateOne({ _id: 1 }, { $inc: { n: 1 } })])
    expect(results.map(outcomeOf)).toEqual(['WRITE_BUFFER_BATCH_FAILED/unknown'])
    expect(calls).toHaveLength(1)
  })

  it('a client closed while the bulkWrite was on the wire: outcome unknown, not "not-sent"', async () => {
    for (const name of ['MongoClientClosedError', 'MongoTopologyClosedError', 'MongoPoolClosedError']) {
      const { db } = fakeDb(() => named(name))
      // connected before: the command may have been on the wire
      Object.assign(db, { client: { options: {}, topology: { description: { servers: new Map([['a', { type: 'Standalone' }]]) } } } })
      const results = await Promise.allSettled([new WriteBuffer(db, quick).collection('c').insertOne({ a: 1 })])
      expect(results.map(outcomeOf), name).toEqual(['WRITE_BUFFER_BATCH_FAILED/unknown'])
    }
  })

  it('a client closed before it ever reached a server (a failed first connect closes the topology): not-sent', async () => {
    const { db } = fakeDb(() => named('MongoTopologyClosedError'))
    const results = await Promise.allSettled([new WriteBuffer(db, quick).collection('c').insertOne({ a: 1 })])
    expect(results.map(outcomeOf)).toEqual(['WRITE_BUFFER_BATCH_FAILED/not-sent'])
  })

  it('a server never reached (selection failed, nothing ever connected): not-sent', async () => {
    const { db } = fakeDb(() => named('MongoServerSelectionError'))
    const results = await Promise.allSettled([new WriteBuffer(db, { ...quick, retry: { maxAttempts: 1 } }).collection('c').updateOne({ _id: 1 }, { $inc: { n: 1 } })])
    expect(results.map(outcomeOf)).toEqual(['WRITE_BUFFER_BATCH_FAILED/not-sent'])
  })

  it('on a replica set, a selection failure may answer the driver\'s own retry: unknown', async () => {
    const { db } = fakeDb(() => named('MongoServerSelectionError'))
    Object.assign(db, { client: { options: {}, topology: { description: { servers: new Map([['a', { type: 'RSPrimary' }]]) } } } })
    const results = await Promise.allSettled([new WriteBuffer(db, { ...quick, retry: { maxAttempts: 1 } }).collection('c').updateOne({ _id: 1 }, { $inc: { n: 1 } })])
    expect(results.map(outcomeOf)).toEqual(['WRITE_BUFFER_BATCH_FAILED/unknown'])
  })

  it('buffers sharing a client share one server-monitoring listener, and each learns from it', async () => {
    const client = Object.assign(new EventEmitter(), { options: {} })
    const buffers = Array.from({ length: 20 }, () => {
      const { db } = fakeDb(() => named('MongoServerSelectionError'))
      Object.assign(db, { client })
      return new WriteBuffer(db, { ...quick, retry: { maxAttempts: 1 } })
    })
    expect(client.listenerCount('serverDescriptionChanged')).toBe(1) // 20 listeners would warn at 11
    client.emit('serverDescriptionChanged', { newDescription: { type: 'RSPrimary' } })
    const results = await Promise.allSettled(buffers.map(b => b.collection('c').updateOne({ _id: 1 }, { $inc: { n: 1 } })))
    expect(new Set(results.map(outcomeOf))).toEqual(new Set(['WRITE_BUFFER_BATCH_FAILED/unknown']))
  })

  it('after an ambiguous failure the targets stay fenced for maxTimeMS + margin: the retry and a later write wait', async () => {
    const started: number[] = []
    const { db } = fakeDb((_m, n) => { started.push(Date.now()); return n === 1 ? named('MongoNetworkTimeoutError') : ok })
    const c = new WriteBuffer(db, { maxTimeMS: 100, retry: { baseDelayMs: 1, maxAttempts: 3 }, coalesce: false }).collection('c')
    const t0 = Date.now()
    await Promise.all([c.updateOne({ _id: 1 }, { $set: { v: 1 } }), c.updateOne({ _id: 1 }, { $set: { v: 2 } })])
    expect(started).toHaveLength(3) // v1, v1 again, v2
    expect((started[1] ?? 0) - t0).toBeGreaterThanOrEqual(100 + 1000 - 20) // fence: maxTimeMS + 1 s margin
  })

  it('writeConcern { w: 0 } is refused at construction, from the options or from the Db', () => {
    const { db } = fakeDb(() => ok)
    expect(() => new WriteBuffer(db, { writeConcern: { w: 0 } })).toThrow(/w: 0 \} is not supported/)
    Object.assign(db, { writeConcern: { w: 0 } })
    expect(() => new WriteBuffer(db)).toThrow(TypeError)
    expect(() => new WriteBuffer(db, { writeConcern: { w: 1 } })).not.toThrow()
  })

  it('so is every other w the driver reads as 0 (it converts with Number): false, \'\', \'0.0\', [0]…', () => {
    const { db } = fakeDb(() => ok)
    for (const w of [false, '', ' ', '0.0', '00', [], [0], '0x0']) {
      expect(() => new WriteBuffer(db, { writeConcern: { w: w as never } }), JSON.stringify(w)).toThrow(/w: 0 \} is not supported/)
    }
    for (const w of [1, 'majority', 2]) expect(() => new WriteBuffer(db, { writeConcern: { w: w as never } })).not.toThrow()
  })

  it('a write concern every batch would fail on is refused at construction', () => {
    const { db } = fakeDb(() => ok)
    const bad: Array<[object, RegExp]> = [
      [{ w: -1 }, /writeConcern\.w must be/], [{ w: 1.5 }, /writeConcern\.w must be/], [{ w: '2' }, /writeConcern\.w must be/],
      [{ w: 1, wtimeoutMS: 'x' }, /wtimeoutMS must be/], [{ w: 1, j: 'yes' }, /writeConcern\.j must be/], [{ w: 1, wtimeoutMs: 5 }, /unknown key "wtimeoutMs"/],
    ]
    for (const [wc, message] of bad) expect(() => new WriteBuffer(db, { writeConcern: wc as never }), JSON.stringify(wc)).toThrow(message)
    for (const wc of [{ w: 'majority', wtimeoutMS: 5000, j: true }, { w: 2 }, { j: true }]) expect(() => new WriteBuffer(db, { writeConcern: wc as never })).not.toThrow()
  })

  it('ordered collection, unknown outcome: a batch\'s writes of one document are all resent or none (a $set resent after its $inc would undo it)', async () => {
    const { db, calls } = fakeDb((_m, n) => n === 1 ? named('MongoNetworkError') : ok)
    const c = new WriteBuffer(db, { ...quick, maxTimeMS: 50, coalesce: false }).collection('c', { ordered: true })
    const results = await Promise.allSettled([c.updateOne({ _id: 1 }, { $set: { x: 1 } }), c.updateOne({ _id: 1 }, { $inc: { x: 10 } })])
    expect(results.map(outcomeOf)).toEqual(['WRITE_BUFFER_BATCH_FAILED/unknown', 'WRITE_BUFFER_BATCH_FAILED/unknown'])
    expect(calls).toHaveLength(1)
  })

  it('an upserting updateMany is told its upsertedId', async () => {
    const { db } = fakeDb(() => ({ upsertedIds: { 0: 'U1' } }))
    await expect(new WriteBuffer(db).collection('c').updateMany({ k: 1 }, { $set: { a: 1 } }, { upsert: true })).resolves.toEqual({ upsertedId: 'U1' })
  })

  it('$inc merges only whole int32 amounts of one sign: fractions round differently summed first, bigger sums would travel as doubles, two signs may pass int32 on the way', async () => {
    for (const [a, b, merged] of [[1, 2, true], [0.1, 0.2, false], [2 ** 30, 2 ** 30, false], [-5, -3, true], [-5, 3, false], [-0, 1, false]] as const) {
      const { db, calls } = fakeDb(() => ok)
      const c = new WriteBuffer(db).collection('c')
      await Promise.all([c.updateOne({ _id: 1 }, { $inc: { n: a } }), c.updateOne({ _id: 1 }, { $inc: { n: b } })])
      expect(calls.length, `${a} + ${b}`).toBe(merged ? 1 : 2)
    }
  })

  it('functions in a document are never stored as code: serializeFunctions is off on every bulkWrite', async () => {
    const { db, calls } = fakeDb(() => ok)
    await new WriteBuffer(db).collection('c').insertOne({ a: 1 })
    expect(calls[0]?.options).toMatchObject({ serializeFunctions: false })
  })
})
