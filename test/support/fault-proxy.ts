import net from 'node:net'

/** Holding matching commands, or their replies, for a while (a congested network, a stalled server). */
export interface HoldRule {
  /** which client chunks start a hold (e.g. the bytes of an `update` command on one collection) */
  match: (chunk: Buffer) => boolean
  holdMs: number
  /** 'request': the command reaches the server late, even after the client gave up on it; 'reply': its answer does */
  direction: 'request' | 'reply'
}

/** A held request is still delivered after the client closed; the server side stays open this long after. */
const LINGER_AFTER_HELD_MS = 5_000

/**
 * Every connection the proxy ends on the driver's side ends with a reset (RST): its own cuts,
 * as a dropped network path or a load balancer does, and the server's own closes (a server
 * stopped) passed on. A FIN opens a window in the driver (mongodb 7.9) that wedges its server
 * monitor for good when the server does not stream heartbeats (no `topologyVersion`:
 * FerretDB, DocumentDB): the socket is destroyed, its 'close' not yet emitted, and a heartbeat
 * started in that window writes to it and waits for a 'drain' that never comes. Every later
 * server selection then fails with the error that made the server Unknown (README, "Known
 * driver issues"; seen in the fault suite and in the restart test, under load). With a reset,
 * the driver learns of the end from the socket's error, in the same tick, and the fault tests
 * test the buffer rather than that wedge.
 */
function cut (socket: net.Socket): void {
  if (socket.destroyed) return
  socket.resetAndDestroy()
}

/**
 * In-process TCP proxy between the driver and the server, for fault tests:
 * cut every connection, drop a connection after N more client bytes (mid-flush),
 * stall traffic, hold matching commands or replies, or refuse connections ("server down").
 * Loopback only.
 */
export class FaultProxy {
  readonly #server: net.Server
  readonly #pairs = new Set<[net.Socket, net.Socket]>()
  #stalled = false
  #down = false
  #dropAfter = -1
  #stalledChunks: Array<() => void> = []
  #hold: HoldRule | null = null
  cuts = 0
  /** commands (or replies) held so far */
  held = 0
  /** errors of connections to the server, by code (a diagnosis when a test fails: not asserted) */
  readonly upstreamErrors: Record<string, number> = {}
  /** connections refused while down, accepted, connected to the server, and closed by the server (a diagnosis: not asserted) */
  readonly connections = { refused: 0, accepted: 0, upstreamConnected: 0, closedByServer: 0 }

  private constructor (readonly targetHost: string, readonly targetPort: number) {
    this.#server = net.createServer(client => { this.#accept(client) })
  }

  static async start (targetHost: string, targetPort: number): Promise<FaultProxy> {
    const proxy = new FaultProxy(targetHost, targetPort)
    await new Promise<void>(resolve => proxy.#server.listen(0, '127.0.0.1', resolve))
    return proxy
  }

  get port (): number { return (this.#server.address() as net.AddressInfo).port }

  /** A mongodb:// URI through the proxy, keeping the original URI's query options. */
  uri (original: string): string {
    const u = new URL(original)
    u.host = `127.0.0.1:${this.port}`
    u.searchParams.set('directConnection', 'true')
    return u.toString()
  }

  #accept (client: net.Socket): void {
    if (this.#down) { this.connections.refused++; cut(client); return }
    this.connections.accepted++
    const upstream = net.connect(this.targetPort, this.targetHost, () => { this.connections.upstreamConnected++ })
    const pair: [net.Socket, net.Socket] = [client, upstream]
    this.#pairs.add(pair)
    const held = { requestsUntil: 0, repliesUntil: 0, requests: [] as Buffer[], timer: null as NodeJS.Timeout | null }
    const deliver = (): void => {
      held.timer = null
      const wait = held.requestsUntil - Date.now()
      if (wait > 0) { held.timer = setTimeout(deliver, wait); return }
      for (const chunk of held.requests.splice(0)) if (!upstream.destroyed) upstream.write(chunk)
    }
    const close = (): void => {
      this.#pairs.delete(pair)
      cut(client)
      // a held request still reaches the server (as in a congested network), then lingers
      if (held.requests.length === 0) upstream.destroy()
      else setTimeout(() => { upstream.destroy() }, held.requestsUntil - Date.now() + LINGER_AFTER_HELD_MS).unref()
    }
    client.on('error', close).on('close', close)
    upstream.on('error', err => {
      // why the proxy could not reach the server (ECONNREFUSED, EADDRNOTAVAIL…): printed by the fault suite's report
      const code = (err as NodeJS.ErrnoException).code ?? err.name
      this.upstreamErrors[code] = (this.upstreamErrors[code] ?? 0) + 1
      close()
    }).on('close', () => {
      if (this.#pairs.has(pair)) this.connections.closedByServer++
      this.#pairs.delete(pair)
      cut(client)
    })
    client.on('data', chunk => {
      const rule = this.#hold
      const now = Date.now()
      if (rule !== null && rule.match(chunk)) {
        this.held++
        this.#hold = null // one command: the ones after it (a retry, a later write) pass
        if (rule.direction === 'request') held.requestsUntil = now + rule.holdMs
        else held.repliesUntil = now + rule.holdMs
      }
      if (held.requestsUntil > now || held.requests.length > 0) {
        // later chunks of this connection wait too, so the byte stream keeps its order
        held.requests.push(chunk)
        held.timer ??= setTimeout(deliver, Math.max(0, held.requestsUntil - now))
        return
      }
      if (this.#dropAfter >= 0) {
        this.#dropAfter -= chunk.length
        if (this.#dropAfter < 0) {
          // forward a part, then cut: the server sees a truncated command
          upstream.write(chunk.subarray(0, Math.max(0, chunk.length + this.#dropAfter)))
          this.#dropAfter = -1
          this.cuts++
          close()
          return
        }
      }
      this.#forward(upstream, chunk)
    })
    upstream.on('data', chunk => {
      const wait = held.repliesUntil - Date.now()
      if (wait > 0) setTimeout(() => { if (!client.destroyed) client.write(chunk) }, wait)
      else this.#forward(client, chunk)
    })
  }

  /** Holds the next matching command (or its reply); `release()` cancels a hold not yet used. */
  holdMatching (rule: HoldRule): void { this.#hold = rule }
  release (): void { this.#hold = null }

  #forward (to: net.Socket, chunk: Buffer): void {
    if (this.#stalled) this.#stalledChunks.push(() => to.write(chunk))
    else to.write(chunk)
  }

  /** Destroys every open connection (both directions). */
  cutAll (): void {
    for (const [a, b] of this.#pairs) { cut(a); b.destroy() }
    this.cuts += this.#pairs.size
    this.#pairs.clear()
  }

  /** The next connection to send more than `bytes` client bytes is cut in the middle. */
  dropAfter (bytes: number): void { this.#dropAfter = bytes }

  /** Holds all traffic (a stalled server) until resume(). */
  stall (): void { this.#stalled = true }

  resume (): void {
    this.#stalled = false
    const chunks = this.#stalledChunks
    this.#stalledChunks = []
    for (const send of chunks) send()
  }

  /** Server "down": cut everything and refuse new connections until up(). */
  down (): void { this.#down = true; this.cutAll() }
  up (): void { this.#down = false }

  async close (): Promise<void> {
    this.#down = true
    this.cutAll()
    await new Promise<void>(resolve => this.#server.close(() => resolve()))
  }
}

export function hostPortOf (uri: string): { host: string, port: number } | undefined {
  try {
    const u = new URL(uri)
    if (u.protocol !== 'mongodb:' || u.host.includes(',')) return undefined
    return { host: u.hostname, port: Number(u.port || 27017) }
  } catch {
    return undefined
  }
}
