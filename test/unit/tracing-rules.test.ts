import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { context, trace } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan, type Sampler, SamplingDecision } from '@opentelemetry/sdk-trace-base'
import type { Db } from 'mongodb'
import { WriteBuffer } from '../../src/index.js'

/** The tracing rules against a fake bulkWrite and an in-memory exporter (no server). */

beforeAll(() => { context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable()) })
afterAll(() => { context.disable() })

function fakeDb (bulkWrite: (n: number) => unknown = () => ({ upsertedIds: {} })): { db: Db, activeInside: Array<string | undefined> } {
  let n = 0
  const activeInside: Array<string | undefined> = []
  const db = {
    databaseName: 'x',
    collection: (name: string) => ({
      collectionName: name,
      bulkWrite: async () => {
        activeInside.push(trace.getActiveSpan()?.spanContext().spanId)
        const out = bulkWrite(++n)
        if (out instanceof Error) throw out
        return out
      },
      find: () => ({ toArray: async () => [] }),
    }),
  } as unknown as Db
  return { db, activeInside }
}

function traced (options: { sampler?: Sampler, processors?: SimpleSpanProcessor[] } = {}) {
  const exporter = new InMemorySpanExporter()
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter), ...(options.processors ?? [])], sampler: options.sampler })
  const spans = (): ReadableSpan[] => exporter.getFinishedSpans().filter(s => s.name.startsWith('bulkWrite '))
  return { provider, spans, tracer: provider.getTracer('test') }
}

const networkError = (): Error => Object.defineProperty(new Error('connection closed'), 'name', { value: 'MongoServerSelectionError' })

describe('tracing rules', () => {
  it('a retry\'s span is a child of the failed attempt\'s span', async () => {
    const { provider, spans } = traced()
    const { db } = fakeDb(n => (n === 1 ? networkError() : { upsertedIds: {} }))
    const wb = new WriteBuffer(db, { tracerProvider: provider, retry: { baseDelayMs: 1 } })
    await sleep(30) // the API is loaded with a dynamic import
    await wb.collection('c').insertOne({ a: 1 })
    const [first, retry] = spans()
    expect(retry?.parentSpanContext?.spanId ?? (retry as unknown as { parentSpanId?: string }).parentSpanId).toBe(first?.spanContext().spanId)
    expect(retry?.attributes['fastify_write_buffer.attempt']).toBe(2)
    await wb.close()
  })

  it('the bulkWrite runs with the batch span active; one link per write', async () => {
    const { provider, spans, tracer } = traced()
    const { db, activeInside } = fakeDb()
    const wb = new WriteBuffer(db, { tracerProvider: provider })
    await sleep(30)
    const c = wb.collection('c')
    await c.insertOne({ warm: 1 }) // the first batch tells the buffer spans are recorded
    await tracer.startActiveSpan('request', async span => {
      await Promise.all(Array.from({ length: 3 }, (_, i) => c.insertOne({ i })))
      span.end()
    })
    const last = spans().at(-1)
    expect(last?.links).toHaveLength(3)
    expect(activeInside.at(-1)).toBe(last?.spanContext().spanId) // driver spans would nest under it
    await wb.close()
  })

  it('a first batch sampled out does not stop later sampled batches from linking their callers', async () => {
    let batches = 0
    // the callers' spans are all sampled; the bulkWrite spans every other one, the first one out
    const everyOther: Sampler = {
      shouldSample: (_context, _traceId, name) => ({
        decision: name.startsWith('bulkWrite ') && batches++ % 2 === 0 ? SamplingDecision.NOT_RECORD : SamplingDecision.RECORD_AND_SAMPLED,
      }),
      toString: () => 'every other batch',
    }
    const { provider, spans, tracer } = traced({ sampler: everyOther })
    const { db } = fakeDb()
    const wb = new WriteBuffer(db, { tracerProvider: provider })
    await sleep(30)
    const c = wb.collection('c')
    for (let i = 0; i < 4; i++) await tracer.startActiveSpan('request', async span => { await c.insertOne({ i }); span.end() })
    const recorded = spans()
    expect(recorded.length).toBeGreaterThan(0)
    for (const s of recorded) expect(s.links.length).toBe(1)
    await wb.close()
  })

  it('a span processor that throws, or a provider whose getTracer throws, never strands a write nor crashes', async () => {
    const throwing = { onStart: () => { throw new Error('processor bug') }, onEnd: () => {}, shutdown: async () => {}, forceFlush: async () => {} }
    const { provider } = traced({ processors: [throwing as unknown as SimpleSpanProcessor] })
    const { db } = fakeDb()
    const wb = new WriteBuffer(db, { tracerProvider: provider, writeTimeoutMs: 2_000 })
    await sleep(30)
    await expect(wb.collection('c').insertOne({ a: 1 })).resolves.toMatchObject({ insertedId: expect.anything() })
    const bad = new WriteBuffer(db, { tracerProvider: { getTracer: () => { throw new Error('provider bug') } } as never })
    await sleep(30)
    await expect(bad.collection('c').insertOne({ a: 1 })).resolves.toBeDefined()
    expect(wb.stats()).toMatchObject({ pending: 0, inFlight: 0 })
    await Promise.all([wb.close(), bad.close()])
  })

  it('the global provider: no SDK behind it, no span; an SDK registered later traces the next batches and links their writes', async () => {
    const { provider, spans, tracer } = traced()
    const { db, activeInside } = fakeDb()
    const wb = new WriteBuffer(db) // no tracerProvider: the API's global (proxy) provider, no SDK yet
    const c = wb.collection('c')
    try {
      await c.insertOne({ before: 1 })
      await c.insertOne({ before: 2 })
      // no valid span active in those bulkWrites (at most the noop tracer's, whose ids are all zeros)
      expect(activeInside.filter(id => id !== undefined && !/^0+$/.test(id))).toEqual([])
      trace.setGlobalTracerProvider(provider)
      await c.insertOne({ after: 1 }) // the first batch since: spans are recorded again
      await tracer.startActiveSpan('request', async span => {
        await Promise.all([c.insertOne({ after: 2 }), c.insertOne({ after: 3 })])
        span.end()
      })
      const recorded = spans()
      expect(recorded).toHaveLength(2)
      expect(recorded[1]?.links).toHaveLength(2)
      expect(activeInside.at(-1)).toBe(recorded[1]?.spanContext().spanId)
    } finally {
      trace.disable()
      await wb.close()
    }
  })
})
