import { describe, expect, it } from 'vitest'
import { ObjectId } from 'mongodb'
import { ErrorCodes, WriteBufferError, WriteRejectedError } from '../../src/index.js'
import {
  bulkResult, bulkWriteError, networkError, rejectWith, serverSelectionError, settle, wrappedNetworkError, wrappedSocketError, writeConcernError,
} from './fake-db.js'
import { fastForward, harness, loose, useFakeClock } from './harness.js'

const FAST_RETRY = { retry: { baseDelayMs: 1 } }

function reasonOf (s: Awaited<ReturnType<typeof settle>> | undefined): Error & Record<string, unknown> {
  if (s?.status !== 'rejected') throw new Error(`expected a rejection, got ${JSON.stringify(s)}`)
  return s.reason
}

describe('outcomes: partial failures (writeErrors)', () => {
  it('rejects only the write at the refused index, keeps the server code, resolves the others with their upsertedId', async () => {
    const { fake, wb, c } = harness()
    fake.next(rejectWith(bulkWriteError(
      [{ index: 1, code: 11000, errmsg: 'E11000 duplicate key error' }],
      bulkResult({ upsertedIds: { 0: 'a', 2: 'c' }, upsertedCount: 2 }))))
    const writes = ['a', 'b', 'c'].map(id => settle(c.updateOne({ _id: id }, { $set: { v: 1 } }, { upsert: true })))
    const [a, b, cc] = await Promise.all(writes)
    expect(fake.calls).toHaveLength(1)
    expect(fake.calls[0]?.ids).toEqual(['a', 'b', 'c'])
    expect(a).toEqual({ status: 'fulfilled', value: { upsertedId: 'a' } })
    expect(cc).toEqual({ status: 'fulfilled', value: { upsertedId: 'c' } })
    const err = reasonOf(b)
    expect(err).toBeInstanceOf(WriteRejectedError)
    expect(err).toMatchObject({ name: 'WriteRejectedError', code: 11000, outcome: 'rejected', attempts: 1, message: 'E11000 duplicate key error' })
    expect(wb.stats()).toMatchObject({ flushedOps: 2, failedOps: 1, retries: 0 })
  })

  it('inserts: the duplicate is rejected with 11000, the others resolve with their insertedId (generated or given)', async () => {
    const { fake, c } = harness()
    fake.seed('c', { _id: 'taken' })
    const [gen, dup, own] = await Promise.all([
      settle(c.insertOne({ x: 1 })),
      settle(c.insertOne({ _id: 'taken', x: 2 })),
      settle(c.insertOne({ _id: 7, x: 3 })),
    ])
    expect(fake.calls).toHaveLength(1)
    expect(gen.status === 'fulfilled' && gen.value.insertedId).toBeInstanceOf(ObjectId)
    expect(own).toEqual({ status: 'fulfilled', value: { insertedId: 7 } })
    expect(reasonOf(dup)).toMatchObject({ code: 11000, outcome: 'rejected' })
    expect(fake.docs('c')).toHaveLength(3) // 'taken', the generated one and 7
  })

  it('a write concern error next to writeErrors: the executed writes end unknown (applied, maybe not durably)', async () => {
    const { fake, c } = harness()
    fake.next(rejectWith(bulkWriteError([{ index: 1, code: 11000 }],
      bulkResult({ insertedCount: 2, writeConcernError: { code: 64, errmsg: 'waiting for replication timed out' } }))))
    const [a, b, d] = await Promise.all([1, 2, 3].map(i => settle(c.insertOne({ _id: i }))))
    for (const s of [a, d]) {
      expect(reasonOf(s)).toBeInstanceOf(WriteBufferError)
      expect(reasonOf(s)).toMatchObject({ code: ErrorCodes.BATCH_FAILED, outcome: 'unknown' })
      expect(reasonOf(s).message).toMatch(/write concern/)
    }
    expect(reasonOf(b)).toMatchObject({ code: 11000, outcome: 'rejected' })
    expect(fake.calls).toHaveLength(1)
  })
})

describe('outcomes: the whole bulkWrite failed', () => {
  // an unknown outcome may hold its documents a while before the retry (a fence): fake clock
  it('network error (MongoBulkWriteError wrapping it, no writeErrors): a $inc ends unknown, a $set by _id is retried', async () => {
    useFakeClock()
    const { fake, wb, c } = harness(FAST_RETRY)
    fake.seed('c', { _id: 1, n: 0 }, { _id: 2, n: 0 })
    fake.next(rejectWith(wrappedNetworkError))
    const [set, inc] = await fastForward(Promise.all([
      settle(c.updateOne({ _id: 1 }, { $set: { s: 'x' } })),
      settle(c.updateOne({ _id: 2 }, { $inc: { n: 1 } })),
    ])).then(s => s.status === 'fulfilled' ? s.value : [])
    expect(set).toEqual({ status: 'fulfilled', value: {} })
    const err = reasonOf(inc)
    expect(err).toBeInstanceOf(WriteBufferError)
    expect(err).toMatchObject({ code: ErrorCodes.BATCH_FAILED, outcome: 'unknown', attempts: 1 })
    expect((err.cause as Error).name).toBe('MongoNetworkError') // unwrapped
    expect(fake.calls.map(call => call.ids)).toEqual([[1, 2], [1]]) // only the $set went again
    expect(fake.doc('c', 2)).toEqual({ _id: 2, n: 0 })
    expect(wb.stats()).toMatchObject({ retries: 1, flushedOps: 1, failedOps: 1, pending: 0 })
  })

  it('network error: inserts with a generated _id are retried and resolve', async () => {
    useFakeClock()
    const { fake, c } = harness(FAST_RETRY)
    fake.next(rejectWith(networkError))
    const s = await fastForward(Promise.all([c.insertOne({ i: 1 }), c.insertOne({ i: 2 })]))
    expect(s.status).toBe('fulfilled')
    const results = s.status === 'fulfilled' ? s.value : []
    expect(fake.calls).toHaveLength(2)
    expect(fake.calls[1]?.ids).toEqual(results.map(r => r.insertedId))
    expect(fake.docs('c')).toHaveLength(2)
  })

  it('a reset socket the driver reports as a plain Error (write ECONNRESET) is a network error: inserts are retried, a $inc ends unknown', async () => {
    useFakeClock()
    const { fake, wb, c } = harness(FAST_RETRY)
    fake.seed('c', { _id: 1, n: 0 })
    // the first write goes alone (nothing in flight), the second in the next batch: both fail
    fake.next(rejectWith(() => wrappedSocketError()), rejectWith(() => wrappedSocketError('EPIPE')))
    const [inc, insert] = await fastForward(Promise.all([
      settle(c.updateOne({ _id: 1 }, { $inc: { n: 1 } })),
      settle(c.insertOne({ i: 1 })),
    ])).then(s => s.status === 'fulfilled' ? s.value : [])
    expect(insert?.status).toBe('fulfilled')
    expect(reasonOf(inc)).toMatchObject({ code: ErrorCodes.BATCH_FAILED, outcome: 'unknown', attempts: 1 })
    expect((reasonOf(inc).cause as { code?: string }).code).toBe('ECONNRESET')
    expect(fake.calls.map(call => call.ids)).toEqual([[1], [insert?.status === 'fulfilled' && insert.value.insertedId], [insert?.status === 'fulfilled' && insert.value.insertedId]]) // the insert went again, the $inc did not
    expect(wb.stats().retries).toBe(1)
  })

  it.each([
    ['a $inc', { $inc: { n: 1 } }, {}],
    ['a $push', { $push: { list: 1 } }, {}],
    ['a $set that changes a filtered field', { $set: { state: 'b' } }, { state: 'a' }],
  ])('network error: %s (not retry-safe) is never sent twice', async (_name, update, extraFilter) => {
    const { fake, wb, c } = harness(FAST_RETRY)
    fake.next(rejectWith(networkError))
    const s = await settle(c.updateOne({ _id: 1, ...extraFilter }, update))
    expect(reasonOf(s)).toMatchObject({ code: ErrorCodes.BATCH_FAILED, outcome: 'unknown' })
    expect(fake.calls).toHaveLength(1)
    expect(wb.stats().retries).toBe(0)
  })

  it('server selection error on a standalone (no driver retry): outcome not-sent', async () => {
    const { fake, c } = harness({ retry: { maxAttempts: 1 } }, 'standalone')
    fake.next(rejectWith(serverSelectionError))
    const s = await settle(c.updateOne({ _id: 1 }, { $inc: { n: 1 } }))
    expect(reasonOf(s)).toBeInstanceOf(WriteBufferError)
    expect(reasonOf(s)).toMatchObject({ code: ErrorCodes.BATCH_FAILED, outcome: 'not-sent', attempts: 1 })
    expect(fake.calls).toHaveLength(1)
  })

  it('server selection error on a standalone: even a $inc is retried, since it was never sent', async () => {
    const { fake, wb, c } = harness(FAST_RETRY, 'standalone')
    fake.seed('c', { _id: 1, n: 0 })
    fake.next(rejectWith(serverSelectionError))
    await expect(c.updateOne({ _id: 1 }, { $inc: { n: 1 } })).resolves.toEqual({})
    expect(fake.calls).toHaveLength(2)
    expect(fake.doc('c', 1)).toEqual({ _id: 1, n: 1 })
    expect(wb.stats().retries).toBe(1)
  })

  it('server selection error when the driver may have retried (replica set): a $inc ends unknown', async () => {
    const { fake, c } = harness(FAST_RETRY, 'replset')
    fake.next(rejectWith(serverSelectionError))
    const s = await settle(c.updateOne({ _id: 1 }, { $inc: { n: 1 } }))
    expect(reasonOf(s)).toMatchObject({ code: ErrorCodes.BATCH_FAILED, outcome: 'unknown' })
    expect(fake.calls).toHaveLength(1)
  })

  it('a write concern error without writeErrors: outcome unknown, not retried', async () => {
    const { fake, c } = harness(FAST_RETRY)
    fake.next(rejectWith(writeConcernError))
    const s = await settle(c.insertOne({ i: 1 }))
    expect(reasonOf(s)).toMatchObject({ code: ErrorCodes.BATCH_FAILED, outcome: 'unknown' })
    expect(fake.calls).toHaveLength(1)
  })

  it('a command refused by the server (ok: 0): outcome rejected, not retried', async () => {
    const { fake, c } = harness(FAST_RETRY)
    const refused = Object.assign(new Error('not authorized'), { code: 13, errorResponse: { ok: 0, code: 13 }, writeErrors: [] })
    Object.defineProperty(refused, 'name', { value: 'MongoBulkWriteError' })
    fake.next(rejectWith(refused))
    const s = await settle(c.insertOne({ i: 1 }))
    expect(reasonOf(s)).toMatchObject({ code: ErrorCodes.BATCH_FAILED, outcome: 'rejected', attempts: 1 })
    expect(fake.calls).toHaveLength(1)
  })

  it('NotWritablePrimary (refused before executing): retried, even a $inc', async () => {
    const { fake, c } = harness(FAST_RETRY, 'standalone')
    const notPrimary = Object.assign(new Error('not primary'), { code: 10107, errorResponse: { ok: 0, code: 10107 }, writeErrors: [] })
    Object.defineProperty(notPrimary, 'name', { value: 'MongoBulkWriteError' })
    fake.next(rejectWith(notPrimary))
    await expect(c.updateOne({ _id: 1 }, { $inc: { n: 1 } }, { upsert: true })).resolves.toEqual({ upsertedId: 1 })
    expect(fake.calls).toHaveLength(2)
  })
})

describe('outcomes: ordered collections', () => {
  it('writes after the first error were not executed: they are sent again, not rejected', async () => {
    const { fake, wb } = harness()
    const c = loose(wb.collection('ord', { ordered: true }))
    fake.seed('ord', { _id: 'b' })
    const [a, b, cc, d] = await Promise.all(['a', 'b', 'c', 'd'].map(id => settle(c.insertOne({ _id: id }))))
    expect(fake.calls.map(call => call.ids)).toEqual([['a', 'b', 'c', 'd'], ['c', 'd']])
    expect(fake.calls.every(call => call.options.ordered === true)).toBe(true)
    expect(a).toEqual({ status: 'fulfilled', value: { insertedId: 'a' } })
    expect(reasonOf(b)).toMatchObject({ code: 11000, outcome: 'rejected', attempts: 1 })
    expect(cc).toEqual({ status: 'fulfilled', value: { insertedId: 'c' } })
    expect(d).toEqual({ status: 'fulfilled', value: { insertedId: 'd' } })
    expect(wb.stats()).toMatchObject({ flushedOps: 3, failedOps: 1, retries: 0, pending: 0 })
  })

  it('a not-executed write that fails on its second send counts one attempt (it never ran the first time)', async () => {
    const { fake, wb } = harness()
    const c = loose(wb.collection('ord', { ordered: true }))
    fake.seed('ord', { _id: 'a' }, { _id: 'b' })
    const [a, b] = await Promise.all(['a', 'b'].map(id => settle(c.insertOne({ _id: id }))))
    expect(fake.calls.map(call => call.ids)).toEqual([['a', 'b'], ['b']])
    expect(reasonOf(a)).toMatchObject({ code: 11000, attempts: 1 })
    expect(reasonOf(b)).toMatchObject({ code: 11000, attempts: 1 })
  })

  it('unordered collections send { ordered: false }', async () => {
    const { fake, c } = harness()
    await c.insertOne({ i: 1 })
    expect(fake.calls[0]?.options).toMatchObject({ ordered: false })
    expect(fake.calls[0]?.options).not.toHaveProperty('writeConcern')
  })

  it('writeConcern is passed to every bulkWrite', async () => {
    const { fake, c } = harness({ writeConcern: { w: 'majority' } })
    await c.insertOne({ i: 1 })
    expect(fake.calls[0]?.options).toMatchObject({ ordered: false, writeConcern: { w: 'majority' } })
  })
})
