import type { WriteConcernSettings } from 'mongodb'
import type { RedisClientLike, ResolvedBusOptions } from './cache/bus.js'
import { InvalidOptionError, describe, type WriteBufferError } from './errors.js'
import { checkWriteConcern } from './mongo/write-concern.js'

import type { Logger } from './logger.js'
import { realClock, type Clock } from './clock.js'

export type { RedisClientLike } from './cache/bus.js'
export type { Logger } from './logger.js'

export interface RetryOptions {
  /** Total attempts for a retry-safe write after a transient failure (1 = never retry). Default: {@link DEFAULTS}. */
  maxAttempts?: number
  /** First backoff delay, in ms; doubles per attempt, with jitter. Default: {@link DEFAULTS}. */
  baseDelayMs?: number
  /** Backoff cap, in ms. Default: {@link DEFAULTS}. */
  maxDelayMs?: number
}

/**
 * Cache coherence across app instances: every acknowledged batch is announced on a Redis
 * pub/sub channel, and every instance drops the cached answers it may have changed.
 */
export interface CacheBusOptions {
  /**
   * An ioredis client (its `duplicate()` makes the subscriber connection; the client itself
   * publishes and is never closed by the buffer), or a `redis://` / `rediss://` URL (then the
   * optional peer dependency `ioredis` is imported and the buffer owns both connections).
   */
  redis: RedisClientLike | string
  /** Pub/sub channel; every instance sharing a database must use the same. Default: {@link DEFAULTS}. */
  channel?: string
  /**
   * While the subscription is down (Redis unreachable, at start too), cached answers read
   * longer ago than this are not served; at 0 every read goes to the server. Default: {@link DEFAULTS}.
   */
  offlineTtlMs?: number
}

export interface CacheOptions {
  /** How long a found document stays cached, in ms. Default: {@link DEFAULTS}. */
  ttlMs?: number
  /** How long a `null` (not found) stays cached, in ms. Default: the smaller of `ttlMs` and {@link DEFAULTS}' `cache.negativeTtlMs`. */
  negativeTtlMs?: number
  /** LRU bound on entries. Default: {@link DEFAULTS}. */
  maxEntries?: number
  /** LRU bound on approximate BSON bytes of cached documents. Default: {@link DEFAULTS}. */
  maxBytes?: number
  /** Redis pub/sub invalidation across app instances (docs/read-cache.md: the consistency model). Default: none. */
  bus?: CacheBusOptions
}

export interface ResolvedCacheOptions {
  ttlMs: number
  negativeTtlMs: number
  maxEntries: number
  maxBytes: number
  bus: ResolvedBusOptions | undefined
}

/** What `onWriteError` is told about the failed write besides its error. */
export interface WriteErrorInfo {
  collection: string
  /** the method that made it: 'insertOne', 'updateOne', … */
  kind: string
  detached: boolean
}

export interface WriteBufferOptions {
  /**
   * Ops per collection per bulkWrite. Default: {@link DEFAULTS}. At most 99,999: at the server's
   * maxWriteBatchSize (100,000) the driver already splits one bulkWrite into two commands.
   */
  maxBatchSize?: number
  /** Approximate BSON bytes per bulkWrite. Default: {@link DEFAULTS}. At most 15 MiB (one command per bulkWrite). */
  maxBatchBytes?: number
  /**
   * Longest a write may wait for company. Default: {@link DEFAULTS}. 0 is adaptive: a collection's
   * writes are sent at the end of the event-loop turn when it has nothing in flight, and gather
   * while it has (group commit). A positive value holds writes up to that long for bigger batches.
   */
  lingerMs?: number
  /** @deprecated since 0.2.0: use `lingerMs` (same meaning; removed in the next minor version). */
  flushIntervalMs?: number
  /** Pending writes (admitted, not settled: queued, in flight or backing off) before `onFull` applies. Default: {@link DEFAULTS}. */
  maxPending?: number
  /** Approximate bytes queued + in flight before `onFull` applies. Default: {@link DEFAULTS}. */
  maxPendingBytes?: number
  /** What a write does when the buffer is full. Default: {@link DEFAULTS}. */
  onFull?: 'wait' | 'reject'
  /**
   * The most bulkWrite commands on the wire at once, across all collections: the ceiling of the
   * adaptive limit, or the limit itself when `inFlightLimit` is `'fixed'`. Default: {@link DEFAULTS}.
   */
  maxInFlight?: number
  /**
   * `'adaptive'`: the limit on bulkWrites in flight starts at 4 (or `maxInFlight` if lower), grows
   * while round trips per write stay near the least seen, and shrinks when they grow (queueing)
   * or the server says it is overloaded, within [1, maxInFlight] (README: how the limit moves).
   * `'fixed'`: always `maxInFlight`. Default: {@link DEFAULTS}.
   */
  inFlightLimit?: 'adaptive' | 'fixed'
  /** Merge consecutive same-target updateOnes ($set, $inc, $unset, $max, $min, $addToSet, $setOnInsert) into one op. Default: {@link DEFAULTS}. */
  coalesce?: boolean
  /** Write concern passed to every bulkWrite. Default: the collection's. */
  writeConcern?: WriteConcernSettings
  /** Per-write deadline (queue wait + retries); 0 = none. Default: {@link DEFAULTS}. */
  writeTimeoutMs?: number
  /**
   * Server-side time limit of every bulkWrite (sent as `maxTimeMS`). It also bounds how long
   * an attempt with an unknown outcome (cut connection, socket timeout) may still apply: its
   * documents stay fenced for maxTimeMS + 1 s before anything else is sent to them.
   * Default: {@link DEFAULTS}.
   */
  maxTimeMS?: number
  /** Longest `close()` waits for the drain before rejecting what is still queued; 0 waits without limit. Default: {@link DEFAULTS}. */
  closeTimeoutMs?: number
  retry?: RetryOptions
  /**
   * Called once for every failed detached write (`{ detached: true }`), with the same coded
   * error an awaiting caller would get: a WriteBufferError (`code`, `outcome`, `attempts`), a
   * WriteRejectedError when the server refused the write (`code` 11000…). Without it such
   * failures are logged at `error` level (never with document contents). A hook that throws
   * is caught and logged.
   */
  onWriteError?: (error: WriteBufferError, info: WriteErrorInfo) => void
  /**
   * OpenTelemetry TracerProvider for the bulkWrite spans. Default: the global one of
   * `@opentelemetry/api` when that package is installed; no spans without it.
   */
  tracerProvider?: { getTracer: (name: string, version?: string) => unknown }
  /** Enables the read cache used by `collection(name).findOne`. */
  cache?: CacheOptions | false
  logger?: Logger
  /**
   * The time the buffer reads (`now()`, a monotonic millisecond count) and its timers. For tests
   * that drive deadlines, fences and lingers with a fake clock. Default: the real one
   * (`performance.now()` and Node's timers).
   */
  clock?: Clock
}

export interface ResolvedOptions {
  maxBatchSize: number
  maxBatchBytes: number
  lingerMs: number
  maxPending: number
  maxPendingBytes: number
  onFullReject: boolean
  maxInFlight: number
  adaptiveInFlight: boolean
  coalesce: boolean
  writeConcern: WriteConcernSettings | undefined
  writeTimeoutMs: number
  maxTimeMS: number
  closeTimeoutMs: number
  maxAttempts: number
  baseDelayMs: number
  maxDelayMs: number
  cache: ResolvedCacheOptions | undefined
  logger: Logger | undefined
  tracerProvider: WriteBufferOptions['tracerProvider']
  clock: Clock
  /** as the internals hold it: they type a write's error as Error (Settler), and settle writes with WriteBufferErrors only */
  onWriteError: ((error: Error, info: WriteErrorInfo) => void) | undefined
}

const MiB = 1024 * 1024

/** `T`'s options that have a default, each required and defined. */
type Defaulted<T, Without extends keyof T = never> = { readonly [K in Exclude<keyof T, Without>]-?: Exclude<T[K], undefined> }

/**
 * Every option's default, as the type of its option. An option of WriteBufferOptions, RetryOptions,
 * CacheOptions or CacheBusOptions that is neither given a default here nor listed as having none
 * does not compile.
 */
export interface OptionDefaults extends Defaulted<WriteBufferOptions,
  // none: the collection's write concern, no logger, the global tracer provider, the logger for
  // failed detached writes, the real clock; flushIntervalMs is lingerMs' deprecated name; retry and cache below
  'writeConcern' | 'logger' | 'tracerProvider' | 'onWriteError' | 'clock' | 'flushIntervalMs' | 'retry' | 'cache'> {
  readonly retry: Defaulted<RetryOptions>
  /** applies when `cache` is given (its own default is off) */
  readonly cache: CacheDefaults
}

interface CacheDefaults extends Defaulted<CacheOptions, 'bus'> {
  readonly bus: Defaulted<CacheBusOptions, 'redis'>
}

function deepFreeze<T extends object> (value: T): T {
  for (const v of Object.values(value)) if (typeof v === 'object' && v !== null) deepFreeze(v)
  return Object.freeze(value)
}

/**
 * The options' defaults, declared once: resolveOptions reads them, the options' JSDoc points
 * here, and `npm run check:readme` (scripts/check-readme.mjs) fails when README's options table
 * says otherwise. `as const`: the declaration file shows the values, not just their types.
 */
export const DEFAULTS = deepFreeze({
  maxBatchSize: 1000,
  maxBatchBytes: 8 * MiB,
  lingerMs: 0,
  maxPending: 100_000,
  maxPendingBytes: 256 * MiB,
  onFull: 'wait',
  /** the adaptive limit's ceiling: it starts at 4 and climbs only while round trips per write stay near the least seen */
  maxInFlight: 16,
  inFlightLimit: 'adaptive',
  coalesce: true,
  writeTimeoutMs: 0,
  maxTimeMS: 5_000,
  /** the plugin bounds closing the client it made by it too */
  closeTimeoutMs: 10_000,
  retry: { maxAttempts: 4, baseDelayMs: 50, maxDelayMs: 2_000 },
  cache: {
    ttlMs: 5_000,
    /** a cap: the default is the smaller of this and the `ttlMs` given */
    negativeTtlMs: 1_000,
    maxEntries: 10_000,
    maxBytes: 64 * MiB,
    bus: { channel: 'fastify-write-buffer', offlineTtlMs: 0 },
  },
} as const satisfies OptionDefaults)

function int (name: string, value: unknown, def: number, min: number, max: number): number {
  if (value === undefined) return def
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new InvalidOptionError(`${name} must be an integer from ${min} to ${max}, got ${describe(value)}`)
  }
  return value
}

function milliseconds (name: string, value: unknown, def: number): number {
  if (value === undefined) return def
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value > 60_000) {
    throw new InvalidOptionError(`${name} must be a number from 0 to 60000, got ${describe(value)}`)
  }
  return value
}

function checkFunction<F> (name: string, value: F | undefined): F | undefined {
  const given: unknown = value
  if (given !== undefined && typeof given !== 'function') throw new InvalidOptionError(`${name} must be a function, got ${describe(given)}`)
  return value
}

function checkTracerProvider (p: WriteBufferOptions['tracerProvider']): WriteBufferOptions['tracerProvider'] {
  if (p !== undefined && typeof (p as { getTracer?: unknown }).getTracer !== 'function') {
    throw new InvalidOptionError(`tracerProvider must be an OpenTelemetry TracerProvider (with getTracer), got ${describe(p)}`)
  }
  return p
}

function checkClock (c: Clock | undefined): Clock {
  if (c === undefined) return realClock
  for (const m of ['now', 'setTimeout', 'clearTimeout'] as const) {
    const f: unknown = c[m]
    if (typeof f !== 'function') throw new InvalidOptionError(`clock.${m} must be a function, got ${describe(f)}`)
  }
  return c
}

function bool (name: string, value: unknown, def: boolean): boolean {
  if (value === undefined) return def
  if (typeof value !== 'boolean') throw new InvalidOptionError(`${name} must be a boolean, got ${describe(value)}`)
  return value
}

/** `value` as given (typed by its caller's declaration), after checking it is an object. */
function object<T extends object> (name: string, value: T | undefined): T | undefined {
  const given: unknown = value
  if (given === undefined) return undefined
  if (given === null || typeof given !== 'object' || Array.isArray(given)) {
    throw new InvalidOptionError(`${name} must be an object, got ${describe(given)}`)
  }
  return value
}

/** An option group's keys, as a record the compiler checks against the group's interface: one missing or extra does not compile. */
type Keys<T> = Record<keyof T, true>

function checkKnown (name: string, value: object, known: object): void {
  for (const key of Object.keys(value)) {
    if (!Object.hasOwn(known, key)) throw new InvalidOptionError(`unknown option ${name}${key}`)
  }
}

const KNOWN = {
  maxBatchSize: true,
  maxBatchBytes: true,
  lingerMs: true,
  flushIntervalMs: true,
  maxPending: true,
  maxPendingBytes: true,
  onFull: true,
  maxInFlight: true,
  inFlightLimit: true,
  coalesce: true,
  writeConcern: true,
  writeTimeoutMs: true,
  maxTimeMS: true,
  closeTimeoutMs: true,
  retry: true,
  cache: true,
  logger: true,
  tracerProvider: true,
  onWriteError: true,
  clock: true,
} satisfies Keys<WriteBufferOptions>
const KNOWN_RETRY = { maxAttempts: true, baseDelayMs: true, maxDelayMs: true } satisfies Keys<RetryOptions>
const KNOWN_CACHE = { ttlMs: true, negativeTtlMs: true, maxEntries: true, maxBytes: true, bus: true } satisfies Keys<CacheOptions>
const KNOWN_BUS = { redis: true, channel: true, offlineTtlMs: true } satisfies Keys<CacheBusOptions>

export const WRITE_BUFFER_OPTION_NAMES: readonly string[] = Object.keys(KNOWN)

function resolveBus (value: CacheBusOptions | undefined): ResolvedBusOptions | undefined {
  const b = object('cache.bus', value)
  if (b === undefined) return undefined
  checkKnown('cache.bus.', b, KNOWN_BUS)
  const redis: unknown = b.redis
  if (typeof redis === 'string') {
    if (!/^rediss?:\/\//.test(redis)) throw new InvalidOptionError(`cache.bus.redis must be a redis:// or rediss:// URL or an ioredis client, got ${describe(redis)}`)
  } else if (redis === null || typeof redis !== 'object' ||
      typeof (redis as RedisClientLike).publish !== 'function' || typeof (redis as RedisClientLike).duplicate !== 'function') {
    throw new InvalidOptionError(`cache.bus.redis must be an ioredis client (with publish and duplicate) or a redis:// URL, got ${describe(redis)}`)
  }
  const channel: unknown = b.channel ?? DEFAULTS.cache.bus.channel
  if (typeof channel !== 'string' || channel === '') throw new InvalidOptionError(`cache.bus.channel must be a non-empty string, got ${describe(channel)}`)
  return { redis: b.redis, channel, offlineTtlMs: int('cache.bus.offlineTtlMs', b.offlineTtlMs, DEFAULTS.cache.bus.offlineTtlMs, 0, 86_400_000) }
}

function resolveCache (value: unknown): ResolvedCacheOptions | undefined {
  if (value === undefined || value === false) return undefined
  const c = object('cache', value as CacheOptions | undefined) ?? {}
  checkKnown('cache.', c, KNOWN_CACHE)
  const ttlMs = int('cache.ttlMs', c.ttlMs, DEFAULTS.cache.ttlMs, 1, 86_400_000)
  return {
    ttlMs,
    negativeTtlMs: int('cache.negativeTtlMs', c.negativeTtlMs, Math.min(ttlMs, DEFAULTS.cache.negativeTtlMs), 0, 86_400_000),
    maxEntries: int('cache.maxEntries', c.maxEntries, DEFAULTS.cache.maxEntries, 1, 10_000_000),
    maxBytes: int('cache.maxBytes', c.maxBytes, DEFAULTS.cache.maxBytes, 1024, 16 * 1024 * MiB),
    bus: resolveBus(c.bus),
  }
}

/**
 * The flushIntervalMs deprecation is told once per process, as Node's own deprecations are
 * (emitWarning's code alone does not deduplicate), however many buffers use the old name.
 */
let warnedFlushIntervalMs = false

/** Validates once at construction; the hot path only reads the resolved values. */
export function resolveOptions (input: unknown): ResolvedOptions {
  const o = object('options', input as WriteBufferOptions | undefined) ?? {}
  checkKnown('', o, KNOWN)
  const onFull: unknown = o.onFull
  if (onFull !== undefined && onFull !== 'wait' && onFull !== 'reject') {
    throw new InvalidOptionError(`onFull must be 'wait' or 'reject', got ${describe(onFull)}`)
  }
  const inFlightLimit: unknown = o.inFlightLimit
  if (inFlightLimit !== undefined && inFlightLimit !== 'adaptive' && inFlightLimit !== 'fixed') {
    throw new InvalidOptionError(`inFlightLimit must be 'adaptive' or 'fixed', got ${describe(inFlightLimit)}`)
  }
  const retry = object('retry', o.retry) ?? {}
  checkKnown('retry.', retry, KNOWN_RETRY)
  const logger = object('logger', o.logger)
  if (logger !== undefined) {
    for (const m of ['debug', 'warn', 'error', 'isLevelEnabled'] as const) {
      const f: unknown = logger[m]
      if (typeof f !== 'function' && (m !== 'isLevelEnabled' || f !== undefined)) throw new InvalidOptionError(`logger.${m} must be a function, got ${describe(f)}`)
    }
  }
  // the deprecated alias, read untyped: it is only ever forwarded to lingerMs
  const legacyLinger = (o as Record<string, unknown>).flushIntervalMs
  if (o.lingerMs !== undefined && legacyLinger !== undefined) {
    throw new InvalidOptionError('flushIntervalMs is the deprecated name of lingerMs: give only lingerMs')
  }
  const lingerMs = legacyLinger === undefined ? milliseconds('lingerMs', o.lingerMs, DEFAULTS.lingerMs) : milliseconds('flushIntervalMs', legacyLinger, DEFAULTS.lingerMs)
  if (legacyLinger !== undefined && !warnedFlushIntervalMs) {
    warnedFlushIntervalMs = true
    process.emitWarning('fastify-write-buffer: the flushIntervalMs option is deprecated, use lingerMs (same meaning)',
      { type: 'DeprecationWarning', code: 'FWB_DEP_FLUSH_INTERVAL_MS' })
  }
  const maxPending = int('maxPending', o.maxPending, DEFAULTS.maxPending, 1, 100_000_000)
  return {
    maxBatchSize: int('maxBatchSize', o.maxBatchSize, DEFAULTS.maxBatchSize, 1, 99_999),
    // under the 16 MiB maxBsonObjectSize at which the driver would split one bulkWrite in
    // two commands (then a failure could leave it half applied)
    maxBatchBytes: int('maxBatchBytes', o.maxBatchBytes, DEFAULTS.maxBatchBytes, 1024, 15 * MiB),
    lingerMs,
    maxPending,
    maxPendingBytes: int('maxPendingBytes', o.maxPendingBytes, DEFAULTS.maxPendingBytes, 17 * MiB, Number.MAX_SAFE_INTEGER),
    onFullReject: (o.onFull ?? DEFAULTS.onFull) === 'reject',
    maxInFlight: int('maxInFlight', o.maxInFlight, DEFAULTS.maxInFlight, 1, 256),
    adaptiveInFlight: (o.inFlightLimit ?? DEFAULTS.inFlightLimit) === 'adaptive',
    coalesce: bool('coalesce', o.coalesce, DEFAULTS.coalesce),
    writeConcern: checkWriteConcern(object('writeConcern', o.writeConcern)),
    writeTimeoutMs: int('writeTimeoutMs', o.writeTimeoutMs, DEFAULTS.writeTimeoutMs, 0, 86_400_000),
    maxTimeMS: int('maxTimeMS', o.maxTimeMS, DEFAULTS.maxTimeMS, 1, 3_600_000),
    closeTimeoutMs: int('closeTimeoutMs', o.closeTimeoutMs, DEFAULTS.closeTimeoutMs, 0, 3_600_000),
    maxAttempts: int('retry.maxAttempts', retry.maxAttempts, DEFAULTS.retry.maxAttempts, 1, 100),
    baseDelayMs: int('retry.baseDelayMs', retry.baseDelayMs, DEFAULTS.retry.baseDelayMs, 0, 60_000),
    maxDelayMs: int('retry.maxDelayMs', retry.maxDelayMs, DEFAULTS.retry.maxDelayMs, 0, 600_000),
    cache: resolveCache(o.cache),
    logger,
    tracerProvider: checkTracerProvider(object('tracerProvider', o.tracerProvider)),
    onWriteError: checkFunction('onWriteError', o.onWriteError) as ResolvedOptions['onWriteError'],
    clock: checkClock(object('clock', o.clock)),
  }
}
