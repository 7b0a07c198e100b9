import { AsyncLocalStorage } from 'node:async_hooks'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { context, trace, type Tracer } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base'
import type { Db, MongoClient } from 'mongodb'
import { WriteBuffer } from '../src/index.js'
import { openDb } from './helpers.js'

let client: MongoClient
let db: Db
const exporter = new InMemorySpanExporter()
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
let tracer: Tracer
beforeAll(async () => {
  ({ client, db } = await openDb('tracing'))
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
  tracer = provider.getTracer('test')
})
afterAll(async () => {
  await client.close()
  context.disable()
})

function tracedBuffer (options = {}): WriteBuffer {
  return new WriteBuffer(db, { tracerProvider: provider, ...options })
}

const bulkSpans = (): ReadableSpan[] => exporter.getFinishedSpans().filter(s => s.name.startsWith('bulkWrite '))

describe('trace continuity across batches', () => {
  it('bulkWrites run outside every caller\'s async context; each caller keeps its own after await', async () => {
    const als = new AsyncLocalStorage<{ request: number }>()
    const seen: Array<{ command: string, store: unknown }> = []
    const onStarted = (ev: { commandName: string }): void => {
      if (['insert', 'update', 'delete'].includes(ev.commandName)) seen.push({ command: ev.commandName, store: als.getStore() })
    }
    client.on('commandStarted', onStarted)
    const wb = new WriteBuffer(db)
    const c = wb.collection('als')
    const after = await Promise.all(Array.from({ length: 50 }, (_, i) => als.run({ request: i }, async () => {
      await c.insertOne({ i })
      await c.updateOne({ i }, { $set: { done: true } })
      return als.getStore()?.request
    })))
    client.off('commandStarted', onStarted)
    expect(seen.length).toBeGreaterThan(0)
    expect(seen.filter(s => s.store !== undefined)).toEqual([]) // no request's store in any batch
    expect(after).toEqual(Array.from({ length: 50 }, (_, i) => i)) // each caller still in its own
    await wb.close()
  })

  it('one root CLIENT span per bulkWrite, linked to the span of every write, for mixed collections', async () => {
    exporter.reset()
    const wb = tracedBuffer()
    const requests: string[] = []
    await Promise.all(Array.from({ length: 20 }, (_, i) => tracer.startActiveSpan(`request ${i}`, async span => {
      requests.push(span.spanContext().spanId)
      await wb.collection(i % 2 === 0 ? 'events' : 'audit').insertOne({ i })
      span.end()
    })))
    const spans = bulkSpans()
    expect(spans.map(s => s.name).sort()).toEqual(['bulkWrite audit', 'bulkWrite events'])
    for (const s of spans) {
      expect(s.kind).toBe(2) // CLIENT
      expect(s.parentSpanContext).toBeUndefined() // a root: the batch belongs to no one request
      expect(s.attributes).toMatchObject({
        'db.system.name': 'mongodb',
        'db.namespace': db.databaseName,
        'db.collection.name': s.name.slice('bulkWrite '.length),
        'db.operation.name': 'bulkWrite',
        'db.operation.batch.size': 10,
      })
      expect(s.links).toHaveLength(10)
    }
    expect(spans.flatMap(s => s.links.map(l => l.context.spanId)).sort()).toEqual([...requests].sort())
    await wb.close()
  })

  it('a write queued in the turn the buffer was built is linked (the API is loaded synchronously)', async () => {
    exporter.reset()
    const span = tracer.startSpan('request')
    const write = context.with(trace.setSpan(context.active(), span), () => {
      // built and written at once, inside the span: nothing awaited between
      const wb = new WriteBuffer(db, { tracerProvider: provider })
      return { wb, done: wb.collection('first').insertOne({ first: true }) }
    })
    await write.done
    span.end()
    const spans = bulkSpans()
    expect(spans.map(s => s.name)).toEqual(['bulkWrite first'])
    expect(spans[0]?.links.map(l => l.context.spanId)).toEqual([span.spanContext().spanId])
    await write.wb.close()
  })

  it('a failed bulkWrite has error status and error.type; past 128 links the rest are counted', async () => {
    exporter.reset()
    await db.collection('dup').insertOne({ _id: 'taken' as never })
    const wb = tracedBuffer()
    const c = wb.collection('dup')
    await tracer.startActiveSpan('request', async span => {
      const writes = [c.insertOne({ _id: 'taken' } as never), ...Array.from({ length: 199 }, (_, i) => c.insertOne({ i }))]
      await Promise.allSettled(writes)
      span.end()
    })
    const [s] = bulkSpans()
    expect(s?.status.code).toBe(2) // ERROR
    expect(s?.attributes['error.type']).toBe('11000')
    expect(s?.links).toHaveLength(128)
    expect(s?.attributes['fastify_write_buffer.links_dropped']).toBe(72)
    await wb.close()
  })

  it('no spans and nothing captured without an active span or provider work; stats() has latency distributions', async () => {
    exporter.reset()
    const wb = tracedBuffer()
    await Promise.all(Array.from({ length: 30 }, (_, i) => wb.collection('plain').insertOne({ i })))
    expect(bulkSpans()[0]?.links).toEqual([]) // written outside any span: nothing to link
    const { queueWaitMs, roundTripMs } = wb.stats()
    expect(roundTripMs.count).toBeGreaterThan(0)
    expect(queueWaitMs.count).toBe(roundTripMs.count) // per batch, not per write
    expect(roundTripMs.max).toBeGreaterThanOrEqual(roundTripMs.p50)
    expect(trace.getActiveSpan()).toBeUndefined()
    await wb.close()
  })
})
