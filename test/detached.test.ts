import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MongoClient, type Db } from 'mongodb'
import { WriteBuffer, type Logger, type WriteErrorInfo } from '../src/index.js'
import { openDb } from './helpers.js'

/** Fire-and-forget writes that never go unhandled, and lingering writes that merge hot updates. */
let client: MongoClient
let db: Db
const unhandled: unknown[] = []
const onUnhandled = (reason: unknown): void => { unhandled.push(reason) }
beforeAll(async () => {
  ({ client, db } = await openDb('detached', { monitorCommands: true }))
  process.on('unhandledRejection', onUnhandled)
})
afterAll(async () => {
  process.off('unhandledRejection', onUnhandled)
  await client.close()
})

function recorder (): { calls: Array<{ err: Error & { code?: unknown, outcome?: unknown }, info: WriteErrorInfo }>, hook: (err: Error, info: WriteErrorInfo) => void } {
  const calls: Array<{ err: Error & { code?: unknown, outcome?: unknown }, info: WriteErrorInfo }> = []
  return { calls, hook: (err, info) => { calls.push({ err, info }) } }
}

function memoryLogger (): Logger & { errors: Array<{ obj: object, msg?: string }> } {
  const errors: Array<{ obj: object, msg?: string }> = []
  return { errors, debug: () => {}, warn: () => {}, error: (obj, msg) => { errors.push({ obj, msg }) } }
}

const tick = (): Promise<void> => new Promise(resolve => setImmediate(resolve))

describe('detached writes', () => {
  it('return undefined; 1,000 failing ones (duplicate keys) reach onWriteError exactly once each, none unhandled', async () => {
    await db.collection('dups').insertMany(Array.from({ length: 1000 }, (_, i) => ({ _id: i })) as never[])
    const { calls, hook } = recorder()
    const wb = new WriteBuffer(db, { onWriteError: hook })
    const c = wb.collection('dups')
    for (let i = 0; i < 1000; i++) expect(c.insertOne({ _id: i }, { detached: true })).toBeUndefined()
    expect(wb.stats().pending).toBe(1000) // counted like awaited writes
    await wb.flush() // waits for detached writes too
    await tick()
    expect(calls).toHaveLength(1000)
    expect(new Set(calls.map(c => c.err.code))).toEqual(new Set([11000]))
    expect(calls.every(c => c.err.outcome === 'rejected')).toBe(true)
    expect(calls[0]?.info).toEqual({ collection: 'dups', kind: 'insertOne', detached: true })
    expect(wb.stats().failedOps).toBe(1000)
    await wb.close()
    expect(unhandled).toEqual([])
  })

  it('server unreachable: 1,000 detached writes each fail into onWriteError once, nothing unhandled', async () => {
    const dead = new MongoClient('mongodb://127.0.0.1:1/', { serverSelectionTimeoutMS: 200 })
    const { calls, hook } = recorder()
    const wb = new WriteBuffer(dead.db('x'), { onWriteError: hook, retry: { maxAttempts: 2, baseDelayMs: 10 } })
    for (let i = 0; i < 1000; i++) wb.collection('e').updateOne({ _id: i }, { $inc: { n: 1 } }, { detached: true })
    await wb.flush()
    await tick()
    expect(calls).toHaveLength(1000)
    expect(calls.every(c => c.err.outcome === 'not-sent')).toBe(true)
    await wb.close()
    await dead.close()
    expect(unhandled).toEqual([])
  })

  it('close with 1,000 detached writes queued on a stalled server: each failure reaches onWriteError exactly once, none unhandled', async () => {
    const stalled = new MongoClient('mongodb://127.0.0.1:1/', { serverSelectionTimeoutMS: 60_000 })
    const { calls, hook } = recorder()
    const wb = new WriteBuffer(stalled.db('x'), { onWriteError: hook, maxBatchSize: 100, closeTimeoutMs: 50 })
    for (let i = 0; i < 1000; i++) wb.collection('q').insertOne({ i }, { detached: true })
    await tick()
    expect(wb.stats()).toMatchObject({ pending: 1000, inFlight: 4 }) // 4 batches of 100 waiting on the wire, 600 queued
    await wb.close() // gives up after closeTimeoutMs: the queued ones fail at once
    await tick()
    expect(calls.filter(c => c.err.code === 'WRITE_BUFFER_CLOSED')).toHaveLength(600)
    await stalled.close() // the 400 on the wire now fail too: never sent
    await new Promise(resolve => setTimeout(resolve, 50))
    expect(calls).toHaveLength(1000)
    expect(calls.slice(600).every(c => c.err.outcome === 'not-sent')).toBe(true)
    expect(calls.every(c => c.info.collection === 'q' && c.info.kind === 'insertOne' && c.info.detached)).toBe(true)
    expect(wb.stats().failedOps).toBe(1000)
    expect(unhandled).toEqual([])
  })

  it('close() sends detached writes still queued; writes after close throw at once', async () => {
    const wb = new WriteBuffer(db, { lingerMs: 60_000 })
    const c = wb.collection('on_close')
    for (let i = 0; i < 100; i++) c.insertOne({ i }, { detached: true })
    await wb.close()
    expect(await db.collection('on_close').countDocuments()).toBe(100)
    expect(() => c.insertOne({ late: true }, { detached: true })).toThrow(expect.objectContaining({ code: 'WRITE_BUFFER_CLOSED' }) as Error)
  })

  it('bad input still throws synchronously, and never joins a batch', async () => {
    const wb = new WriteBuffer(db)
    const c = wb.collection('bad')
    expect(() => c.insertOne('nope' as never, { detached: true })).toThrow(TypeError)
    expect(() => c.updateOne({ _id: 1 }, { notAnOperator: 1 } as never, { detached: true })).toThrow(/update operators/)
    await expect(c.updateOne({ _id: 1 }, { $set: { a: 1 } }, { detached: 'yes' } as never)).rejects.toThrow(/detached must be a boolean/)
    expect(wb.stats().pending).toBe(0)
    await wb.close()
  })

  it('a hook that throws (or rejects) is caught and logged; without a hook failures are logged, never with contents', async () => {
    await db.collection('hooks').insertOne({ _id: 'x' as never })
    const logger = memoryLogger()
    const throwing = new WriteBuffer(db, { logger, onWriteError: () => { throw new Error('hook bug') } })
    throwing.collection('hooks').insertOne({ _id: 'x', secret: 'pw' }, { detached: true })
    const rejecting = new WriteBuffer(db, { logger, onWriteError: async () => { throw new Error('async hook bug') } })
    rejecting.collection('hooks').insertOne({ _id: 'x', secret: 'pw' }, { detached: true })
    const silent = new WriteBuffer(db, { logger })
    silent.collection('hooks').insertOne({ _id: 'x', secret: 'pw' }, { detached: true })
    await Promise.all([throwing.flush(), rejecting.flush(), silent.flush()])
    await tick()
    await tick()
    expect(logger.errors.map(e => e.msg).sort()).toEqual([
      'write buffer: detached writes failed', 'write buffer: onWriteError rejected', 'write buffer: onWriteError threw',
    ])
    expect(JSON.stringify(logger.errors)).not.toMatch(/pw/)
    expect(logger.errors.find(e => e.msg === 'write buffer: detached writes failed')?.obj).toMatchObject({ collection: 'hooks', kind: 'insertOne', code: 11000, count: 1 })
    expect(logger.errors.find(e => e.msg === 'write buffer: onWriteError threw')?.obj).toMatchObject({ code: 11000, err: expect.stringContaining('hook bug') })
    await Promise.all([throwing.close(), rejecting.close(), silent.close()])
    expect(unhandled).toEqual([])
  })

  it('full buffer: onFull "reject" throws at once; "wait" takes detached writes up to 2 × maxPending, then throws', async () => {
    const stalled = new MongoClient('mongodb://127.0.0.1:1/', { serverSelectionTimeoutMS: 60_000 })
    const reject = new WriteBuffer(stalled.db('x'), { maxPending: 10, onFull: 'reject', closeTimeoutMs: 1, onWriteError: () => {} })
    for (let i = 0; i < 10; i++) reject.collection('f').insertOne({ i }, { detached: true })
    expect(() => reject.collection('f').insertOne({ i: 10 }, { detached: true })).toThrow(expect.objectContaining({ code: 'WRITE_BUFFER_FULL' }) as Error)
    const wait = new WriteBuffer(stalled.db('x'), { maxPending: 10, onFull: 'wait', closeTimeoutMs: 1, onWriteError: () => {} })
    for (let i = 0; i < 20; i++) wait.collection('f').insertOne({ i }, { detached: true })
    expect(wait.stats()).toMatchObject({ pending: 10, waiting: 10 })
    expect(() => wait.collection('f').insertOne({ i: 20 }, { detached: true })).toThrow(/2 × maxPending 10/)
    await Promise.all([reject.close(), wait.close()])
    await stalled.close()
  })

  it('a read through the cache sees a detached (and a lingering) write at once', async () => {
    await db.collection('seen').insertOne({ _id: 1 as never, n: 0 })
    const wb = new WriteBuffer(db, { cache: {} })
    const c = wb.collection('seen')
    expect(await c.findOne({ _id: 1 })).toMatchObject({ n: 0 })
    c.updateOne({ _id: 1 }, { $inc: { n: 1 } }, { detached: true, lingerMs: 60_000 })
    expect(await c.findOne({ _id: 1 })).toMatchObject({ n: 1 }) // patched in the cache
    await wb.flush() // sends the lingering write at once
    expect(await db.collection('seen').findOne({ _id: 1 as never })).toMatchObject({ n: 1 })
    await wb.close()
  })
})

describe('lingering writes', () => {
  it('1,000 logins of 10 users within a second cost at most 20 update statements, and end as if applied one by one', async () => {
    await db.collection('users').insertMany(Array.from({ length: 10 }, (_, u) => ({ _id: u, logins: 0, lastLoginAt: new Date(0) })) as never[])
    let statements = 0
    const count = (ev: { commandName: string, command: { update?: unknown, updates?: unknown[] } }): void => {
      if (ev.commandName === 'update' && ev.command.update === 'users') statements += ev.command.updates?.length ?? 0
    }
    client.on('commandStarted', count)
    const wb = new WriteBuffer(db)
    const users = wb.collection('users')
    const expectedLast = new Map<number, number>()
    const start = Date.now()
    for (let i = 0; i < 1000; i++) {
      const u = i % 10
      const at = start + i // increasing, then one out of order below
      expectedLast.set(u, Math.max(expectedLast.get(u) ?? 0, at))
      users.updateOne({ _id: u }, { $max: { lastLoginAt: new Date(at) }, $inc: { logins: 1 } }, { detached: true, lingerMs: 500 })
      if (i % 100 === 0) await new Promise(resolve => setTimeout(resolve, 50)) // spread over about half a second
    }
    users.updateOne({ _id: 0 }, { $max: { lastLoginAt: new Date(start - 1) }, $inc: { logins: 1 } }, { detached: true, lingerMs: 500 }) // older: $max keeps the later
    await wb.flush()
    client.off('commandStarted', count)
    console.log(`1,001 logins of 10 users: ${statements} update statements`)
    expect(statements).toBeLessThanOrEqual(20)
    const docs = await db.collection<{ _id: number, logins: number, lastLoginAt: Date }>('users').find().sort({ _id: 1 }).toArray()
    for (const d of docs) {
      expect(d.logins).toBe(d._id === 0 ? 101 : 100)
      expect(d.lastLoginAt.getTime()).toBe(expectedLast.get(d._id))
    }
    expect(wb.stats().coalescedOps).toBeGreaterThan(900)
    await wb.close()
  })
})
