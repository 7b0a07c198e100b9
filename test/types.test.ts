import { describe, expectTypeOf, it } from 'vitest'
import Fastify from 'fastify'
import type { ObjectId } from 'mongodb'
import writeBuffer, {
  type BufferedCollection, type InsertResult, type UpdateResult, type WriteBufferStats, type WriteOutcome, WriteBuffer,
} from '../src/index.js'

// Compile-time checks (npm test type-checks test/); the runtime bodies only build values.
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
    expectTypeOf<Users['insertOne']>().returns.toEqualTypeOf<Promise<InsertResult>>()
    expectTypeOf<Users['updateOne']>().returns.toEqualTypeOf<Promise<UpdateResult>>()
    expectTypeOf<Users['findOne']>().returns.toEqualTypeOf<Promise<User | null>>()
    expectTypeOf<Users['insertOne']>().parameter(0).toMatchTypeOf<{ username: string, logins: number }>()
    expectTypeOf<WriteBufferStats['pending']>().toEqualTypeOf<number>()
    expectTypeOf<WriteOutcome>().toEqualTypeOf<'not-sent' | 'rejected' | 'unknown'>()
  })
})
