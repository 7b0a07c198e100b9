import { describe, expectTypeOf, it } from 'vitest'
import Fastify from 'fastify'
import { MongoClient, type ObjectId } from 'mongodb'
import writeBuffer, {
  type BufferedCollection, type DeleteResult, type ErrorCode, type InsertResult, type UpdateResult, type WriteBufferOptions,
  type WriteBufferPluginOptions, type WriteBufferStats, type WriteOutcome, type WriteResult, WriteBuffer, WriteBufferError,
  WriteRejectedError, writeBufferPlugin,
} from '../src/index.js'
import * as core from '../src/core.js'

// Compile-time checks (npm test type-checks test/); the runtime bodies only build values,
// and the calls that must not compile sit in functions that are never called.
describe('public types', () => {
  it('the plugin decorates app.writeBuffer and request.writeSignal', async () => {
    const app = Fastify()
    app.post('/x', async (request) => {
      expectTypeOf(request.writeSignal).toEqualTypeOf<AbortSignal>()
      return null
    })
    expectTypeOf(app.writeBuffer).toEqualTypeOf<WriteBuffer>()
    expectTypeOf(writeBuffer).toBeFunction()
    await app.close()
  })

  it('write methods resolve to per-write results', () => {
    interface User { _id: ObjectId, username: string, logins: number }
    type Users = BufferedCollection<User>
    expectTypeOf<ReturnType<Users['insertOne']>>().toEqualTypeOf<Promise<InsertResult<ObjectId>>>()
    expectTypeOf<ReturnType<Users['updateOne']>>().toEqualTypeOf<Promise<UpdateResult<ObjectId>>>()
    expectTypeOf<ReturnType<Users['deleteOne']>>().toEqualTypeOf<Promise<DeleteResult>>()
    // detached: nothing is returned, so nothing can go unhandled
    const calls = (users: Users, id: ObjectId) => {
      expectTypeOf(users.insertOne({ _id: id, username: 'a', logins: 0 }, { detached: true })).toEqualTypeOf<undefined>()
      expectTypeOf(users.updateOne({ _id: id }, { $inc: { logins: 1 } }, { detached: true, lingerMs: 100 })).toEqualTypeOf<undefined>()
      expectTypeOf(users.deleteMany({ username: 'a' }, { detached: true })).toEqualTypeOf<undefined>()
      expectTypeOf(users.updateOne({ _id: id }, { $inc: { logins: 1 } })).toEqualTypeOf<Promise<UpdateResult<ObjectId>>>()
      expectTypeOf(users.insertOne({ _id: id, username: 'a', logins: 0 }, { detached: false })).toEqualTypeOf<Promise<InsertResult<ObjectId>>>()
    }
    expectTypeOf(calls).toBeFunction()
    expectTypeOf<Users['findOne']>().returns.toEqualTypeOf<Promise<User | null>>()
    expectTypeOf<Users['insertOne']>().parameter(0).toMatchTypeOf<{ username: string, logins: number }>()
    expectTypeOf<WriteBufferStats['pending']>().toEqualTypeOf<number>()
    expectTypeOf<WriteOutcome>().toEqualTypeOf<'not-sent' | 'rejected' | 'unknown'>()
  })

  it('result types take the id type, unknown by default', () => {
    expectTypeOf<InsertResult['insertedId']>().toBeUnknown()
    expectTypeOf<UpdateResult['upsertedId']>().toEqualTypeOf<unknown>()
    expectTypeOf<InsertResult<number>['insertedId']>().toEqualTypeOf<number>()
    expectTypeOf<UpdateResult<string>['upsertedId']>().toEqualTypeOf<string | undefined>()
    expectTypeOf<WriteResult<number>>().toEqualTypeOf<InsertResult<number> | UpdateResult<number> | DeleteResult>()
  })

  it('insertedId and upsertedId have the schema’s _id type (InferIdType, as the driver)', () => {
    const wb = {} as unknown as WriteBuffer
    const byNumber = () => wb.collection<{ _id: number, name: string }>('n')
    type WithOptionalId = BufferedCollection<{ _id?: string, name: string }>
    const withoutId = () => wb.collection<{ name: string }>('o')
    expectTypeOf<Awaited<ReturnType<ReturnType<typeof byNumber>['insertOne']>>['insertedId']>().toEqualTypeOf<number>()
    expectTypeOf<Awaited<ReturnType<ReturnType<typeof byNumber>['updateOne']>>['upsertedId']>().toEqualTypeOf<number | undefined>()
    expectTypeOf<Awaited<ReturnType<ReturnType<typeof byNumber>['updateMany']>>['upsertedId']>().toEqualTypeOf<number | undefined>()
    expectTypeOf<Awaited<ReturnType<ReturnType<typeof byNumber>['replaceOne']>>['upsertedId']>().toEqualTypeOf<number | undefined>()
    expectTypeOf<Awaited<ReturnType<WithOptionalId['insertOne']>>['insertedId']>().toEqualTypeOf<string>()
    expectTypeOf<Awaited<ReturnType<ReturnType<typeof withoutId>['insertOne']>>['insertedId']>().toEqualTypeOf<ObjectId>()
    expectTypeOf<Awaited<ReturnType<ReturnType<typeof withoutId>['updateOne']>>['upsertedId']>().toEqualTypeOf<ObjectId | undefined>()

    // a declared schema's _id is checked as the driver checks it
    const typed = async () => {
      await byNumber().insertOne({ _id: 1, name: 'a' })
      // @ts-expect-error the schema's _id is a number
      await byNumber().insertOne({ _id: 'x', name: 'a' })
      // @ts-expect-error the schema requires _id
      await byNumber().insertOne({ name: 'a' })
      await withoutId().insertOne({ name: 'a' })
    }
    expectTypeOf(typed).toBeFunction()
  })

  it('the default schema takes any _id and reports it as it came (any)', () => {
    const wb = {} as unknown as WriteBuffer
    type Default = BufferedCollection
    expectTypeOf<Awaited<ReturnType<Default['insertOne']>>['insertedId']>().toBeAny()
    expectTypeOf<Awaited<ReturnType<Default['updateOne']>>['upsertedId']>().toBeAny()
    const inserts = async () => {
      const c = wb.collection('c')
      await c.insertOne({ _id: 1 })
      await c.insertOne({ _id: 'a', n: 1 })
      await c.insertOne({ _id: { day: '2026-01-01', user: 7 } })
      await c.insertOne({ n: 1 })
      await c.updateOne({ _id: 1 }, { $inc: { n: 1 } }, { upsert: true })
    }
    expectTypeOf(inserts).toBeFunction()
  })

  it('plugin options: exactly one of { db } or { url, database? }; {} does not compile', () => {
    const db = new MongoClient('mongodb://127.0.0.1:1/').db('app')
    const app = Fastify()
    const forms = () => {
      app.register(writeBuffer, { db })
      app.register(writeBuffer, { db, connectTimeoutMs: 0, maxBatchSize: 500, cache: { ttlMs: 1_000 } })
      app.register(writeBufferPlugin, { url: 'mongodb://127.0.0.1/app' })
      app.register(writeBuffer, { url: 'mongodb://127.0.0.1', database: 'app', clientOptions: { maxPoolSize: 5 }, onFull: 'reject' })
      // @ts-expect-error neither db nor url
      app.register(writeBuffer, {})
      // @ts-expect-error neither db nor url
      app.register(writeBuffer, { maxBatchSize: 10 })
      // @ts-expect-error both db and url
      app.register(writeBuffer, { db, url: 'mongodb://127.0.0.1' })
      // @ts-expect-error database goes with url
      app.register(writeBuffer, { db, database: 'app' })
      // @ts-expect-error url is a string
      app.register(writeBuffer, { url: 27017 })
    }
    expectTypeOf(forms).toBeFunction()
    expectTypeOf<{ db: typeof db }>().toMatchTypeOf<WriteBufferPluginOptions>()
    expectTypeOf<{ url: string, database?: string }>().toMatchTypeOf<WriteBufferPluginOptions>()
    expectTypeOf<Record<string, never>>().not.toMatchTypeOf<WriteBufferPluginOptions>()
  })

  it('onWriteError is told a WriteBufferError: (e) => e.code compiles, and a refusal narrows to the server\'s number', () => {
    expectTypeOf<Parameters<NonNullable<WriteBufferOptions['onWriteError']>>[0]>().toEqualTypeOf<WriteBufferError>()
    const db = new MongoClient('mongodb://127.0.0.1:1/').db('app')
    const hooks = () => {
      new WriteBuffer(db, { onWriteError: (e) => e.code }).collection('c')
      new WriteBuffer(db, {
        onWriteError: (e, info) => {
          expectTypeOf(e.code).toEqualTypeOf<ErrorCode | number>()
          expectTypeOf(e.outcome).toEqualTypeOf<WriteOutcome>()
          if (e instanceof WriteRejectedError) expectTypeOf(e.code).toEqualTypeOf<number>()
          expectTypeOf(info.collection).toEqualTypeOf<string>()
        },
      }).collection('c')
      Fastify().register(writeBuffer, { db, onWriteError: (e) => { if (e.code === 11000) e.attempts.toFixed() } })
    }
    expectTypeOf(hooks).toBeFunction()
  })

  it('fastify-write-buffer/core has the core and not the plugin', () => {
    expectTypeOf(core.WriteBuffer).toEqualTypeOf(WriteBuffer)
    expectTypeOf(core).toHaveProperty('BATCH_CHANNEL')
    expectTypeOf(core).not.toHaveProperty('default')
    expectTypeOf(core).not.toHaveProperty('writeBufferPlugin')
  })
})
