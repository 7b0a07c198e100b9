import type { Context, Link, Span, SpanContext, Tracer, TracerProvider } from '@opentelemetry/api'
import { loadOpenTelemetryApi } from './opentelemetry-api.cjs'

/**
 * OpenTelemetry spans for bulkWrites, optional and free when unused.
 *
 * `@opentelemetry/api` is an optional peer dependency, loaded synchronously when the buffer is
 * built (./opentelemetry-api.cjs), so the first write is traced too; without the package, none. Each
 * bulkWrite gets a span `bulkWrite <collection>`, kind CLIENT, with no parent: a batch
 * belongs to no single request. Instead it links to the span that was active when each of its
 * writes was queued (at most MAX_LINKS; the rest are counted in
 * `fastify_write_buffer.links_dropped`), the way Pub/Sub clients trace batched publishes. A
 * retry is a new bulkWrite: its span is a child of the failed attempt's span.
 *
 * Capturing the active span costs a context lookup per write, so it is done only while spans
 * are really recorded (an SDK is registered): the last span created says so. Likewise a batch
 * starts no span at all while the global provider still has no SDK behind it (its proxy has no
 * delegate tracer): the noop span it would get has an invalid context, links nothing, and
 * cost an attribute object, a links array and a context per batch.
 */

export const MAX_LINKS = 128
const TRACER_NAME = 'fastify-write-buffer'
/** The package's version (a unit test keeps it equal to package.json's). */
export const VERSION = '0.2.0'
const SPAN_KIND_CLIENT = 2 // SpanKind.CLIENT, without importing the enum

type Api = typeof import('@opentelemetry/api')

export interface BatchSpan {
  span: Span
  context: SpanContext
}

/** The API's proxy provider (the global one): it knows whether an SDK is behind it yet. */
interface Delegator { getDelegateTracer: (name: string, version?: string) => Tracer | undefined }

export class Tracing {
  #api: Api | undefined
  #tracer: Tracer | undefined
  /** the provider, when it is the API's proxy: asked whether an SDK is registered while nothing records */
  #proxy: Delegator | undefined
  /** whether spans are recorded: then writes capture their active span */
  #recording = true

  constructor (readonly database: string, provider: TracerProvider | undefined) {
    const api = loadOpenTelemetryApi()
    if (api === undefined) return // not installed: no tracing
    try {
      const from = provider ?? api.trace.getTracerProvider()
      this.#tracer = from.getTracer(TRACER_NAME, VERSION)
      this.#api = api
      if (typeof (from as Partial<Delegator>).getDelegateTracer === 'function') this.#proxy = from as unknown as Delegator
    } catch { /* a provider that throws: no tracing, rather than a crash */ }
  }

  /** Whether writes should capture the active span now (cheap: read per write). */
  get capturing (): boolean {
    return this.#tracer !== undefined && this.#recording
  }

  /** The span active in the caller's context, to link a batch to it. */
  activeSpan (): SpanContext | undefined {
    const span = this.#api?.trace.getActiveSpan()
    return span === undefined ? undefined : span.spanContext()
  }

  /**
   * Whether a batch would get nothing but a noop span: nothing recorded so far and no SDK behind
   * the global provider yet (read per batch: one registered later is used from its next batch).
   */
  get idle (): boolean {
    return !this.#recording && this.#proxy !== undefined && this.#proxy.getDelegateTracer(TRACER_NAME, VERSION) === undefined
  }

  /** Starts the span of one bulkWrite; undefined when not tracing. Never throws (a tracer that does means no span). */
  start (collection: string, ops: number, links: ReadonlyArray<SpanContext | undefined>, parent: SpanContext | undefined, attempt: number): BatchSpan | undefined {
    try {
      return this.#start(collection, ops, links, parent, attempt)
    } catch {
      return undefined
    }
  }

  /**
   * Runs `send(a, b, c)` — the batch's bulkWrite, or its insert command — with the batch's span
   * active, so the driver's own spans nest under it; without a span, in the root context all
   * the same (a batch belongs to no one). Nothing is allocated for it when there is no context
   * to switch.
   */
  send<A, B, C, R> (batchSpan: BatchSpan | undefined, send: (a: A, b: B, c: C) => R, a: A, b: B, c: C): R {
    const api = this.#api
    if (api === undefined) return send(a, b, c)
    if (batchSpan === undefined) {
      return api.context.active() === api.ROOT_CONTEXT ? send(a, b, c) : api.context.with(api.ROOT_CONTEXT, send, undefined, a, b, c)
    }
    return api.context.with(api.trace.setSpan(api.ROOT_CONTEXT, batchSpan.span), send, undefined, a, b, c)
  }

  #start (collection: string, ops: number, links: ReadonlyArray<SpanContext | undefined>, parent: SpanContext | undefined, attempt: number): BatchSpan | undefined {
    const api = this.#api
    const tracer = this.#tracer
    if (api === undefined || tracer === undefined || this.idle) return undefined
    const spanLinks: Link[] = []
    let dropped = 0
    for (const context of links) {
      // one link per write (the contract), even when several writes share a span
      if (context === undefined) continue
      if (spanLinks.length < MAX_LINKS) spanLinks.push({ context })
      else dropped++
    }
    const attributes: Record<string, string | number> = {
      'db.system.name': 'mongodb',
      'db.namespace': this.database,
      'db.collection.name': collection,
      'db.operation.name': 'bulkWrite',
      'db.operation.batch.size': ops,
    }
    if (dropped > 0) attributes['fastify_write_buffer.links_dropped'] = dropped
    if (attempt > 1) attributes['fastify_write_buffer.attempt'] = attempt
    const options = { kind: SPAN_KIND_CLIENT, attributes, links: spanLinks, root: parent === undefined }
    const context: Context | undefined = parent === undefined ? undefined : api.trace.setSpanContext(api.ROOT_CONTEXT, parent)
    const span = tracer.startSpan(`bulkWrite ${collection}`, options, context)
    // no SDK: the noop tracer's spans have an invalid context; a span an SDK sampled out has a
    // valid one, and later spans may be sampled in: writes keep capturing then
    this.#recording = span.isRecording() || api.trace.isSpanContextValid(span.spanContext())
    return { span, context: span.spanContext() }
  }

  /** Ends a bulkWrite's span, with the error's type and status when it failed. Never throws. */
  end (batchSpan: BatchSpan | undefined, error: unknown): void {
    if (batchSpan === undefined) return
    try {
      this.#end(batchSpan, error)
    } catch { /* a span processor that throws must not strand the batch */ }
  }

  #end (batchSpan: BatchSpan, error: unknown): void {
    if (error !== undefined) {
      const { type, message } = describeFailure(error)
      batchSpan.span.setAttribute('error.type', type)
      const code = this.#api?.SpanStatusCode.ERROR
      if (code !== undefined) batchSpan.span.setStatus({ code, message })
    }
    batchSpan.span.end()
  }
}

/** `error.type`: the server's or driver's code when there is one, else the error's name. */
function describeFailure (error: unknown): { type: string, message: string | undefined } {
  const e: { name?: unknown, code?: unknown, message?: unknown } | null = typeof error === 'object' ? error : null
  const code = e?.code
  const type = typeof code === 'number' || typeof code === 'string' ? String(code) : typeof e?.name === 'string' ? e.name : 'Error'
  return { type, message: typeof e?.message === 'string' ? e.message : undefined }
}
