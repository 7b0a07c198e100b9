import net from 'node:net'

/**
 * A TCP proxy that delays every byte by `delayMs`, each way: a slow network or a slow server
 * in front of a real one (the cache bus's Redis), with nothing lost, reordered or refused.
 * `delayMs` may change at any time; it applies to bytes that arrive from then on, and bytes
 * never overtake the ones before them (a smaller delay waits for the queue ahead).
 */
export class DelayProxy {
  /** added to every chunk, each way, from now on */
  delayMs: number
  readonly #server: net.Server
  readonly #sockets = new Set<net.Socket>()
  readonly #pipes = new Set<DelayedPipe>()

  private constructor (readonly host: string, readonly targetPort: number, delayMs: number) {
    this.delayMs = delayMs
    this.#server = net.createServer(client => { this.#accept(client) })
  }

  static async start (host: string, port: number, delayMs = 0): Promise<DelayProxy> {
    const proxy = new DelayProxy(host, port, delayMs)
    await new Promise<void>((resolve, reject) => {
      proxy.#server.once('error', reject)
      proxy.#server.listen(0, '127.0.0.1', () => { resolve() })
    })
    return proxy
  }

  get port (): number { return (this.#server.address() as net.AddressInfo).port }

  /** The given URL (redis://…) with the proxy's host and port instead of the server's. */
  url (through: string): string {
    const u = new URL(through)
    u.hostname = '127.0.0.1'
    u.port = String(this.port)
    return u.toString()
  }

  async close (): Promise<void> {
    for (const pipe of this.#pipes) pipe.stop()
    for (const socket of this.#sockets) socket.destroy()
    await new Promise<void>(resolve => { this.#server.close(() => { resolve() }) })
  }

  #accept (client: net.Socket): void {
    const upstream = net.connect({ host: this.host, port: this.targetPort })
    for (const socket of [client, upstream]) {
      this.#sockets.add(socket)
      socket.on('close', () => { this.#sockets.delete(socket) })
      // either side failing ends the pair: the other side sees its connection close
      socket.on('error', () => { client.destroy(); upstream.destroy() })
    }
    const delay = (): number => this.delayMs
    const pipes = [new DelayedPipe(client, upstream, delay), new DelayedPipe(upstream, client, delay)]
    for (const pipe of pipes) {
      this.#pipes.add(pipe)
      pipe.done = () => { this.#pipes.delete(pipe) }
    }
  }
}

/** One direction: chunks read from `from` are written to `to` `delay()` ms later, in order. */
class DelayedPipe {
  readonly #queue: Array<{ due: number, chunk: Buffer | null }> = []
  #timer: NodeJS.Timeout | undefined
  /** when the last chunk queued is due: a later one never goes before it */
  #lastDue = 0
  done: () => void = () => {}

  constructor (from: net.Socket, readonly to: net.Socket, readonly delay: () => number) {
    from.on('data', (chunk: Buffer) => { this.#push(chunk) })
    // the end of the stream is delayed as the bytes before it are
    from.on('end', () => { this.#push(null) })
    from.on('close', () => { if (this.#queue.length === 0) this.stop() })
  }

  stop (): void {
    clearTimeout(this.#timer)
    this.#timer = undefined
    this.#queue.length = 0
    this.done()
  }

  #push (chunk: Buffer | null): void {
    const due = this.#lastDue = Math.max(performance.now() + this.delay(), this.#lastDue)
    this.#queue.push({ due, chunk })
    if (this.#queue.length === 1) this.#arm()
  }

  #arm (): void {
    const head = this.#queue[0]
    if (head === undefined) return
    this.#timer = setTimeout(() => { this.#flush() }, Math.max(0, head.due - performance.now()))
    this.#timer.unref()
  }

  #flush (): void {
    const now = performance.now()
    while (this.#queue.length > 0 && (this.#queue[0] as { due: number }).due <= now + 1) {
      const { chunk } = this.#queue.shift() as { chunk: Buffer | null }
      if (this.to.destroyed) continue
      if (chunk === null) this.to.end()
      else this.to.write(chunk)
    }
    this.#arm()
  }
}
