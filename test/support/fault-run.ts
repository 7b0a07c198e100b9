import type { Db, MongoClient } from 'mongodb'

/** Helpers of the fault tests (faults.test.ts, server-restart.test.ts). */

export const sleep = (ms: number): Promise<void> => new Promise(resolve => setTimeout(resolve, ms))

/** Rejects when `p` has not settled within `ms`. */
export async function within<T> (ms: number, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_resolve, reject) => { timer = setTimeout(() => reject(new Error(`not settled within ${ms} ms`)), ms) })
  try { return await Promise.race([p, timeout]) } finally { clearTimeout(timer) }
}

/** Reads again (up to 5 times, 500 ms apart) when a read meets a network error a fault left behind. */
export async function readAgainOnNetworkError<T> (read: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await read()
    } catch (err) {
      const name = (err as Error).name
      if (attempt >= 5 || !/^Mongo(Network|ServerSelection|PoolCleared)/.test(name)) throw err
      await sleep(500)
    }
  }
}

/** marker → how many documents of `name` carry it. */
export async function insertCopies (name: string, from: Db): Promise<Map<number, number>> {
  const rows = await from.collection(name).aggregate<{ _id: number, n: number }>([{ $group: { _id: '$marker', n: { $sum: 1 } } }]).toArray()
  return new Map(rows.map(r => [r._id, r.n]))
}

/**
 * The driver's view of a server (heartbeats, pool clears, a heartbeat under way, its monitor's
 * state), printed when a fault test fails: a diagnosis, not asserted. It found the driver's
 * monitor wedge (docs/outcomes.md, "Known driver issues").
 */
export class MonitorWatch {
  readonly #log: string[] = []
  /** when the heartbeat under way started (0: none) */
  #heartbeatSince = 0
  readonly #t0 = Date.now()

  watch (c: MongoClient): void {
    const note = (line: string): void => {
      this.#log.push(`${Date.now() - this.#t0} ms ${line}`)
      if (this.#log.length > 400) this.#log.splice(0, 100)
    }
    c.on('serverHeartbeatStarted', () => { this.#heartbeatSince = Date.now() })
    c.on('serverHeartbeatFailed', e => { this.#heartbeatSince = 0; note(`heartbeat failed after ${e.duration} ms: ${(e.failure as Error | undefined)?.message}`) })
    c.on('serverHeartbeatSucceeded', e => { this.#heartbeatSince = 0; if (e.duration > 1000) note(`heartbeat succeeded after ${e.duration} ms`) })
    c.on('serverDescriptionChanged', e => { if (e.previousDescription.type !== e.newDescription.type) note(`server ${e.previousDescription.type} -> ${e.newDescription.type} ${e.newDescription.error?.message ?? ''}`) })
    c.on('connectionPoolCleared', () => { note('pool cleared') })
    c.on('connectionCheckOutFailed', e => { note(`checkout failed: ${e.reason}`) })
  }

  /** What happened lately, and `monitor` (a monitorState() taken before the client closed). */
  report (monitor: unknown): unknown {
    return { events: this.#log.slice(-40), heartbeatUnderWayMs: this.#heartbeatSince === 0 ? 0 : Date.now() - this.#heartbeatSince, monitor }
  }

  reset (): void {
    this.#log.length = 0
    this.#heartbeatSince = 0
  }
}

/** The driver's monitor of each server of `c` (internal fields, for a failing test's report only). */
export function monitorState (c: MongoClient | undefined): unknown {
  const servers = (c as unknown as { topology?: { s?: { servers?: Map<string, { monitor?: Record<string, unknown> }> } } } | undefined)?.topology?.s?.servers
  if (servers === undefined) return null
  return [...servers.values()].map(server => {
    const m = server.monitor as { s?: { state?: string }, monitorId?: { toJSON?: () => unknown }, connection?: { id?: unknown, closed?: boolean, socket?: { destroyed?: boolean, pending?: boolean, writableLength?: number, readyState?: string } } | null } | undefined
    const conn = m?.connection
    return {
      state: m?.s?.state,
      interval: m?.monitorId?.toJSON?.(),
      connection: conn == null ? null : { id: conn.id, closed: conn.closed, destroyed: conn.socket?.destroyed, pending: conn.socket?.pending, writableLength: conn.socket?.writableLength, readyState: conn.socket?.readyState },
    }
  })
}
