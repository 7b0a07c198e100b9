import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Fastify from 'fastify'
import type { Db, MongoClient } from 'mongodb'
import writeBufferPlugin, {
  ConnectError, InvalidOptionError, InvalidWriteError, WriteBuffer, WriteBufferError, WriteRejectedError, type WriteOutcome,
} from '../src/index.js'
import { openDb } from './helpers.js'

// One check recognises every error the package creates: `e instanceof WriteBufferError`,
// against the real server, for each way a write can fail that a caller can provoke.

let client: MongoClient
let db: Db

beforeAll(async () => { ({ client, db } = await openDb('error_family')) })
afterAll(async () => { await client?.close() })

/** What a caller of `p` catches. */
async function caught (p: Promise<unknown>): Promise<unknown> {
  return await p.then(() => { throw new Error('expected a rejection') }, (x: unknown) => x)
}

/** The one check, and what it lets strict TypeScript read without a cast. */
function expectMember (e: unknown, code: string | number, outcome: WriteOutcome): WriteBufferError {
  expect(e instanceof WriteBufferError).toBe(true)
  if (!(e instanceof WriteBufferError)) throw new Error('unreachable')
  expect(e).toBeInstanceOf(Error)
  expect(e.code).toBe(code)
  expect(e.outcome).toBe(outcome)
  expect(typeof e.attempts).toBe('number')
  expect(typeof e.statusCode).toBe('number')
  return e
}

describe('every error is instanceof WriteBufferError', () => {
  it('a duplicate key: WriteRejectedError, the server\'s code 11000, outcome rejected, the server\'s error as cause', async () => {
    const wb = new WriteBuffer(db)
    const users = wb.collection<{ _id: string, name: string }>('dup')
    await users.insertOne({ _id: 'ann', name: 'first' })
    const e = await caught(users.insertOne({ _id: 'ann', name: 'second' }))
    const member = expectMember(e, 11000, 'rejected')
    expect(member).toBeInstanceOf(WriteRejectedError)
    expect(member.attempts).toBe(1)
    expect(member.statusCode).toBe(500)
    expect((member.cause as { code?: unknown } | undefined)?.code).toBe(11000)
    if (e instanceof WriteRejectedError) {
      const code: number = e.code // narrowed to the subclass: the server's number, no cast
      expect(code).toBe(11000)
    }
    await wb.close()
  })

  it('an invalid write: InvalidWriteError, still a TypeError, never sent', async () => {
    const wb = new WriteBuffer(db)
    const e = await caught(wb.collection('invalid').insertOne('not a document' as never))
    expectMember(e, 'WRITE_BUFFER_INVALID_WRITE', 'not-sent')
    expect(e).toBeInstanceOf(InvalidWriteError)
    expect(e).toBeInstanceOf(TypeError)
    await wb.close()
    expect(await db.collection('invalid').countDocuments()).toBe(0)
  })

  it('a full buffer (onFull: reject): WRITE_BUFFER_FULL, not sent', async () => {
    const wb = new WriteBuffer(db, { maxPending: 1, onFull: 'reject', lingerMs: 1_000 })
    const c = wb.collection('full')
    const first = c.insertOne({ n: 1 })
    const e = await caught(c.insertOne({ n: 2 }))
    expectMember(e, 'WRITE_BUFFER_FULL', 'not-sent')
    await wb.close()
    await first
    expect(await db.collection('full').countDocuments()).toBe(1)
  })

  it('a closed buffer: WRITE_BUFFER_CLOSED, not sent', async () => {
    const wb = new WriteBuffer(db)
    await wb.close()
    const e = await caught(wb.collection('closed').insertOne({ n: 1 }))
    expectMember(e, 'WRITE_BUFFER_CLOSED', 'not-sent')
  })

  it('an abort before the write was sent: WRITE_BUFFER_ABORTED, not sent', async () => {
    const wb = new WriteBuffer(db, { lingerMs: 1_000 })
    const controller = new AbortController()
    const p = wb.collection('aborted').insertOne({ n: 1 }, { signal: controller.signal })
    controller.abort()
    const e = await caught(p)
    expectMember(e, 'WRITE_BUFFER_ABORTED', 'not-sent')
    await wb.close()
    expect(await db.collection('aborted').countDocuments()).toBe(0)
  })

  it('a deadline passed while queued: WRITE_BUFFER_TIMEOUT, not sent', async () => {
    const wb = new WriteBuffer(db, { lingerMs: 5_000 })
    const e = await caught(wb.collection('timeout').insertOne({ n: 1 }, { timeoutMs: 20 }))
    expectMember(e, 'WRITE_BUFFER_TIMEOUT', 'not-sent')
    await wb.close()
    expect(await db.collection('timeout').countDocuments()).toBe(0)
  })

  it('a bad option: InvalidOptionError, still a TypeError', () => {
    const e = (() => { try { return new WriteBuffer(db, { maxPending: -1 }) } catch (x: unknown) { return x } })()
    expectMember(e, 'WRITE_BUFFER_INVALID_OPTION', 'not-sent')
    expect(e).toBeInstanceOf(InvalidOptionError)
    expect(e).toBeInstanceOf(TypeError)
  })

  it('the plugin cannot reach the server: ConnectError, the driver\'s error as cause', async () => {
    const app = Fastify()
    const e = await caught((async () => {
      await app.register(writeBufferPlugin, { url: 'mongodb://127.0.0.1:9/x', connectTimeoutMs: 200 })
      await app.ready()
    })())
    const member = expectMember(e, 'WRITE_BUFFER_CONNECT_FAILED', 'not-sent')
    expect(member).toBeInstanceOf(ConnectError)
    expect(member.cause).toBeInstanceOf(Error)
    await app.close()
  })

  it('errors from elsewhere are not members', () => {
    expect(new TypeError('x') instanceof WriteBufferError).toBe(false)
    expect(new Error('x') instanceof WriteBufferError).toBe(false)
    expect((null as unknown) instanceof WriteBufferError).toBe(false)
    expect(Object.assign(new Error('x'), { code: 11000 }) instanceof WriteBufferError).toBe(false)
    // and the subclasses keep the ordinary check
    expect(new InvalidWriteError('x') instanceof WriteRejectedError).toBe(false)
    expect(new WriteBufferError('WRITE_BUFFER_FULL', 'x', 'not-sent') instanceof WriteRejectedError).toBe(false)
  })
})
