import net from 'node:net'

/**
 * In-process TCP proxy between the driver and the server, for fault tests:
 * cut every connection, drop a connection after N more client bytes (mid-flush),
 * stall traffic, or refuse connections ("server down"). Loopback only.
 */
export class FaultProxy {
  readonly #server: net.Server
  readonly #pairs = new Set<[net.Socket, net.Socket]>()
  #stalled = false
  #down = false
  #dropAfter = -1
  #stalledChunks: Array<() => void> = []
  cuts = 0

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
    if (this.#down) { client.destroy(); return }
    const upstream = net.connect(this.targetPort, this.targetHost)
    const pair: [net.Socket, net.Socket] = [client, upstream]
    this.#pairs.add(pair)
    const close = (): void => {
      this.#pairs.delete(pair)
      client.destroy()
      upstream.destroy()
    }
    client.on('error', close).on('close', close)
    upstream.on('error', close).on('close', close)
    client.on('data', chunk => {
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
    upstream.on('data', chunk => { this.#forward(client, chunk) })
  }

  #forward (to: net.Socket, chunk: Buffer): void {
    if (this.#stalled) this.#stalledChunks.push(() => to.write(chunk))
    else to.write(chunk)
  }

  /** Destroys every open connection (both directions). */
  cutAll (): void {
    for (const [a, b] of this.#pairs) { a.destroy(); b.destroy() }
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
