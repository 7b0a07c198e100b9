import { setImmediate as turnEnd } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import type { Db } from 'mongodb'
import { WriteBuffer } from '../../src/index.js'

function downDb (): Db {
  const err = Object.defineProperty(new Error('no server'), 'name', { value: 'MongoServerSelectionError' })
  return {
    collection: (name: string) => ({ collectionName: name, bulkWrite: async () => { throw err } }),
  } as unknown as Db
}

function memoryLogger () {
  const errors: Array<{ obj: Record<string, unknown>, msg?: string }> = []
  return { errors, debug: () => {}, warn: () => {}, error: (obj: object, msg?: string) => { errors.push({ obj: obj as Record<string, unknown>, msg }) } }
}

describe('failed detached writes without onWriteError', () => {
  it('a failed batch of 1,000 detached writes makes one log line with its count, per collection and method', async () => {
    const logger = memoryLogger()
    const wb = new WriteBuffer(downDb(), { logger, retry: { maxAttempts: 1 } })
    for (let i = 0; i < 1000; i++) wb.collection('events').insertOne({ i, secret: 'pw' }, { detached: true })
    wb.collection('users').updateOne({ _id: 1 }, { $inc: { n: 1 } }, { detached: true })
    await wb.flush()
    await turnEnd()
    // (the buffer also logs each failed batch once, with its counts)
    const detached = logger.errors.filter(e => e.msg === 'write buffer: detached writes failed')
    expect(detached).toHaveLength(2)
    expect(detached.map(e => e.obj).sort((a, b) => String(a.collection).localeCompare(String(b.collection)))).toEqual([
      expect.objectContaining({ collection: 'events', kind: 'insertOne', count: 1000, code: 'WRITE_BUFFER_BATCH_FAILED', outcome: 'not-sent' }),
      expect.objectContaining({ collection: 'users', kind: 'updateOne', count: 1, code: 'WRITE_BUFFER_BATCH_FAILED', outcome: 'not-sent' }),
    ])
    expect(JSON.stringify(logger.errors)).not.toMatch(/pw/)
    await wb.close()
  })

  it('with onWriteError, the hook is still called once per failed write', async () => {
    const seen: string[] = []
    const wb = new WriteBuffer(downDb(), { retry: { maxAttempts: 1 }, onWriteError: (_err, info) => { seen.push(info.kind) } })
    for (let i = 0; i < 50; i++) wb.collection('events').insertOne({ i }, { detached: true })
    await wb.flush()
    await turnEnd()
    expect(seen).toHaveLength(50)
    await wb.close()
  })
})
