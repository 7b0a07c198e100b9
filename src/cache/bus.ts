import { randomUUID } from 'node:crypto'
import { realClock, within, type Clock } from '../clock.js'
import type { Logger } from '../logger.js'
import type { WriteOp } from '../write/write-op.js'
import { decode, encode, summarize, type BusMessage } from './bus-message.js'
import { Heartbeat } from './heartbeat.js'

/**
 * The part of an ioredis client the cache bus uses (a structural type: ioredis is an optional
 * peer dependency and its types must not be needed to compile against this package).
 */
export interface RedisClientLike {
  /** 'wait', 'connecting', 'connect', 'ready', 'close', 'reconnecting', 'end' */
  readonly status: string
  publish (channel: string, message: Buffer): Promise<unknown>
  subscribe (...channels: string[]): Promise<unknown>
  duplicate (override?: Record<string, unknown>): RedisClientLike
  on (event: string, listener: (...args: unknown[]) => void): unknown
  quit (): Promise<unknown>
  disconnect (): void
}

export interface ResolvedBusOptions {
  /** an ioredis client, or a redis:// / rediss:// URL (then ioredis is imported) */
  redis: RedisClientLike | string
  channel: string
  offlineTtlMs: number
}

/** What the bus tells the cache. */
export interface BusListener {
  /** another instance's batch was acknowledged */
  remote: (message: BusMessage) => void
  /** the subscription is confirmed (at start, and after every outage) */
  online: () => void
  /** the subscription is lost: messages may be missed from now on */
  offline: () => void
}

export interface BusStats {
  online: boolean
  published: number
  received: number
  /** malformed messages dropped */
  dropped: number
  /** times the subscription was lost, or the heartbeat stopped coming back, after it had been up */
  outages: number
  /** the liveness heartbeat (heartbeat.ts): sent and received, its interval, its worst detection time, the latest one's round trip */
  heartbeats: { sent: number, received: number, intervalMs: number, detectionMs: number, echoMs: number | undefined }
}

/** At most one warning per this long for malformed messages (a flood must not flood the log). */
const MALFORMED_WARN_MS = 60_000
/** How long close() waits for the publisher's last messages before cutting the connection. */
const QUIT_MS = 1_000

type RedisConstructor = new (url: string) => RedisClientLike
/** The ioredis module as both builds see it: `Redis` is a named export, and also the default (module.exports) */
interface RedisModule { Redis?: RedisConstructor, default?: RedisConstructor }

/**
 * Cache coherence across instances over Redis pub/sub: one message per acknowledged batch
 * (bus-message.ts), published on one connection, received on another (`duplicate()` of the
 * given client: a subscribed connection can do nothing else). Nothing here ever waits for
 * Redis: publishing is fire-and-forget (ioredis queues while it reconnects), and the cache is
 * told when the subscription is up or down so it can stop trusting its entries.
 *
 * Own messages are recognised by the instance id they carry and ignored: the writes were
 * applied to this cache when they were queued. A heartbeat (heartbeat.ts) on a channel of
 * this instance's own checks the whole loop: when one does not come back within its deadline
 * (Redis frozen, a partition, a bus too slow) the bus counts as offline, as when the
 * subscription is lost.
 */
export class CacheBus {
  readonly instanceId = randomUUID()
  readonly #options: ResolvedBusOptions
  readonly #logger: Logger | undefined
  readonly #listener: BusListener
  #pub: RedisClientLike | undefined
  #sub: RedisClientLike | undefined
  /** the publisher is ours (made from a URL): close() closes it */
  #ownPub = false
  #online = false
  #closed = false
  /** connection generation of the subscriber: a subscribe confirmed on an older one means nothing */
  #generation = 0
  #everOnline = false
  #warnedDown = false
  #warnedPublish = false
  #lastMalformedWarn = -Infinity
  #stats = { published: 0, received: 0, dropped: 0, outages: 0 }
  readonly #heartbeatChannel: string
  readonly #heartbeat: Heartbeat
  readonly #clock: Clock

  /** writes told `unknown` this turn, by collection (gatherUnknown) */
  readonly #gathered = new Map<string, WriteOp[]>()

  constructor (options: ResolvedBusOptions, logger: Logger | undefined, listener: BusListener, clock: Clock = realClock) {
    this.#options = options
    this.#clock = clock
    this.#logger = logger
    this.#listener = listener
    this.#heartbeatChannel = `${options.channel}:heartbeat:${this.instanceId}`
    this.#heartbeat = new Heartbeat(options.offlineTtlMs, {
      send: sentAt => {
        const pub = this.#pub
        if (pub?.status !== 'ready') return
        const beat = Buffer.allocUnsafe(8)
        beat.writeDoubleLE(sentAt)
        pub.publish(this.#heartbeatChannel, beat).catch(() => { /* a beat not coming back says it */ })
      },
      stale: () => { this.#stale() },
      fresh: () => { this.#fresh() },
    }, clock)
    const { redis } = options
    if (typeof redis === 'string') {
      import('ioredis').then((mod: unknown) => {
        if (this.#closed) return
        const { Redis = (mod as RedisModule).default } = mod as RedisModule
        if (Redis === undefined) throw new TypeError('ioredis exports no Redis class')
        this.#ownPub = true
        this.#start(new Redis(redis))
      }).catch((err: unknown) => {
        this.#warn({ err: String(err) }, 'cache bus: cannot start (cache.bus.redis is a URL: is the ioredis package installed?); cached reads go to the server')
      })
    } else {
      this.#start(redis)
    }
  }

  get online (): boolean { return this.#online }

  stats (): BusStats {
    return { online: this.#online, ...this.#stats, heartbeats: { sent: this.#heartbeat.sent, received: this.#heartbeat.received, intervalMs: this.#heartbeat.intervalMs, detectionMs: this.#heartbeat.detectionMs, echoMs: this.#heartbeat.echoMs } }
  }

  /** A write told `unknown` (it may be applied): announced with those of its collection told so this turn, as one batch (close() sends what is gathered). */
  gatherUnknown (name: string, op: WriteOp): void {
    let ops = this.#gathered.get(name)
    if (ops === undefined) {
      this.#gathered.set(name, ops = [])
      queueMicrotask(() => { this.#publishGathered(name) })
    }
    ops.push(op)
  }

  #publishGathered (name: string): void {
    const ops = this.#gathered.get(name)
    this.#gathered.delete(name)
    if (ops !== undefined) this.publishUnknown(name, ops)
  }

  /** Writes told `unknown`, as one batch: any of their upserts may have created a document. */
  publishUnknown (name: string, ops: readonly WriteOp[]): void { this.publish(name, ops, noUpsert, false) }

  /**
   * Tells the other instances about a batch: acknowledged (its upserted _ids by index), or
   * (`acknowledged` false) told `unknown`, so any of its upserts may have created a document.
   * Never throws, never waits.
   */
  publish (name: string, ops: readonly WriteOp[], upsertedIdOf: (index: number) => unknown, acknowledged = true): void {
    const pub = this.#pub
    if (pub === undefined || this.#closed || ops.length === 0) return
    try {
      const bytes = encode(this.instanceId, name, summarize(ops, upsertedIdOf, acknowledged))
      this.#stats.published++
      pub.publish(this.#options.channel, Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)).then(() => {
        this.#warnedPublish = false
      }, (err: unknown) => {
        if (this.#warnedPublish || this.#closed) return
        this.#warnedPublish = true
        this.#warn({ collection: name, err: String(err) }, 'cache bus: publish failed; other instances see this collection\'s writes after at most cache.ttlMs')
      })
    } catch (err) {
      this.#warn({ collection: name, err: String(err) }, 'cache bus: could not publish a batch')
    }
  }

  async close (): Promise<void> {
    if (this.#closed) return
    for (const name of [...this.#gathered.keys()]) this.#publishGathered(name)
    this.#closed = true
    this.#online = false
    this.#heartbeat.stop()
    this.#sub?.disconnect()
    const pub = this.#pub
    if (pub !== undefined && this.#ownPub) {
      if (pub.status !== 'ready') {
        pub.disconnect()
        return
      }
      await within(this.#clock, pub.quit().catch(() => {}), QUIT_MS)
      pub.disconnect()
    }
  }

  #start (pub: RedisClientLike): void {
    this.#pub = pub
    if (this.#ownPub) {
      // ours: without a listener ioredis prints every failed reconnect to the console
      pub.on('error', (err: unknown) => { this.#down(err) })
    }
    // ours too; we subscribe again on every 'ready' ourselves, and say when it is confirmed
    const sub = this.#sub = pub.duplicate({ autoResubscribe: false, lazyConnect: false })
    sub.on('messageBuffer', (channel: unknown, message: unknown) => { this.#message(channel as Buffer, message as Buffer) })
    sub.on('ready', () => { this.#subscribe(sub) })
    sub.on('error', (err: unknown) => { this.#down(err) })
    sub.on('close', () => { this.#lost() })
    sub.on('end', () => { this.#lost() })
    if (sub.status === 'ready') this.#subscribe(sub)
    this.#heartbeat.start()
  }

  #subscribe (sub: RedisClientLike): void {
    const generation = this.#generation
    sub.subscribe(this.#options.channel, this.#heartbeatChannel).then(() => {
      if (this.#closed || generation !== this.#generation || this.#online) return
      this.#online = true
      this.#heartbeat.arm()
      if (this.#warnedDown) {
        this.#logger?.warn({ channel: this.#options.channel },
          this.#everOnline ? 'cache bus: subscribed again; entries cached before the outage are dropped' : 'cache bus: subscribed; caching starts')
      }
      this.#everOnline = true
      this.#warnedDown = false
      this.#listener.online()
    }, () => { /* the connection went away: 'ready' comes again after the reconnect */ })
  }

  #lost (): void {
    this.#generation++
    this.#heartbeat.disarm()
    if (!this.#online || this.#closed) return
    this.#online = false
    this.#stats.outages++
    this.#listener.offline()
    this.#down(undefined)
  }

  /** Our heartbeat stopped coming back in time while subscribed (Redis frozen, a partition, a slow bus): offline until one does. */
  #stale (): void {
    if (!this.#online || this.#closed) return
    this.#online = false
    this.#stats.outages++
    this.#listener.offline()
    this.#down(new Error(`a heartbeat not back from Redis within ${this.#heartbeat.deadlineMs} ms (frozen, a network partition, or too slow)`))
  }

  /** The heartbeat is back and the subscription never went away: online again (the cache drops what it had). */
  #fresh (): void {
    if (this.#online || this.#closed) return
    this.#online = true
    this.#logger?.warn({ channel: this.#options.channel }, 'cache bus: heartbeat back; entries cached before the outage are dropped')
    this.#warnedDown = false
    this.#listener.online()
  }

  /** Once per outage (and once at a start that cannot reach Redis). */
  #down (err: unknown): void {
    if (this.#warnedDown || this.#closed || this.#online) return
    this.#warnedDown = true
    const bypass = this.#options.offlineTtlMs === 0 ? 'read from the server' : `served only if read less than ${this.#options.offlineTtlMs} ms ago`
    this.#warn({ channel: this.#options.channel, err: err instanceof Error ? err.message : undefined },
      `cache bus: ${this.#everOnline ? 'subscription lost' : 'cannot reach Redis'}; until it is back, cached reads are ${bypass}`)
  }

  #message (channel: Buffer, bytes: Buffer): void {
    if (this.#closed) return
    const name = channel.toString()
    if (name === this.#heartbeatChannel) {
      // when it was sent (this process's clock): how prompt the whole loop is
      if (bytes.byteLength === 8) this.#heartbeat.beat(bytes.readDoubleLE(0))
      return
    }
    if (name !== this.#options.channel) return
    let message: BusMessage
    try {
      message = decode(bytes)
    } catch (err) {
      this.#stats.dropped++
      const now = this.#clock.now()
      if (now - this.#lastMalformedWarn >= MALFORMED_WARN_MS) {
        this.#lastMalformedWarn = now
        this.#warn({ channel: this.#options.channel, bytes: bytes.byteLength, dropped: this.#stats.dropped, err: String(err) },
          'cache bus: malformed message dropped')
      }
      return
    }
    if (message.source === this.instanceId) return
    this.#stats.received++
    this.#listener.remote(message)
  }

  #warn (obj: object, msg: string): void {
    if (this.#logger !== undefined) this.#logger.warn(obj, msg)
    else process.emitWarning(msg, { code: 'FWB_CACHE_BUS' })
  }
}

const noUpsert = (): undefined => undefined
