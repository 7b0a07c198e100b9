import { realClock, type Clock, type ClockTimer } from '../clock.js'

/**
 * Proof that the server reads its sockets again, for the fence (buffer/retries.ts).
 *
 * `maxTimeMS` bounds how long a command can run once the server has read it — not how long
 * it can sit unread: a paused server (SIGSTOP, a VM freeze, a storage stall) holds requests in
 * its socket buffers, and a fence of maxTimeMS from the client's failure can end before the
 * held attempt even starts (docs/server-behaviours.md: `maxTimeMS` starts when the server reads the command). A reply to a command sent after the failure proves
 * the server is reading again; a request it held was then read too, and ends within maxTimeMS
 * of that reply. So a fence ends maxTimeMS + margin after both the failure and that reply.
 * What this cannot see: a request delayed in the network (not in the server) past the reply.
 *
 * One probe at a time per buffer, shared by every fence waiting for it: a ping, repeated
 * after `retryMs` until one sent at or after the moment asked about is answered.
 */
/** How long one ping may go unanswered before another is sent. */
export const PING_TIMEOUT_MS = 2_000

export class ServerLiveness {
  /** when the latest answered ping was sent, and when its answer came */
  #sentAt = -Infinity
  #repliedAt = 0
  #probe: Promise<void> | null = null
  #stopped = false
  #pause: { timer: ClockTimer, done: () => void } | null = null

  /**
   * `ping` undefined: the Db cannot run commands (a stand-in), and fences end by their time alone.
   * A ping unanswered after `timeoutMs` counts as failed and another is sent: one stuck on a
   * connection that will never answer (a peer gone silent keeps its TCP connection: docs/server-behaviours.md: a frozen peer keeps its TCP connections)
   * must not hold every fence for good. `ping` is given the same limit, to give its connection up.
   */
  constructor (
    readonly ping: ((timeoutMs: number) => Promise<unknown>) | undefined,
    readonly retryMs = 100,
    readonly timeoutMs = PING_TIMEOUT_MS,
    readonly clock: Clock = realClock
  ) {}

  /** Clock time of the first answer to a ping sent at or after `since` (now, once stopped). */
  async replyAfter (since: number): Promise<number> {
    while (this.#sentAt < since) {
      if (this.#stopped || this.ping === undefined) return this.clock.now()
      this.#probe ??= this.#pingOnce().finally(() => { this.#probe = null })
      await this.#probe
    }
    return this.#repliedAt
  }

  /** The buffer is closed: fences waiting for a proof end by their time alone. */
  stop (): void {
    this.#stopped = true
    if (this.#pause !== null) {
      this.clock.clearTimeout(this.#pause.timer)
      this.#pause.done()
    }
  }

  async #pingOnce (): Promise<void> {
    const sentAt = this.clock.now()
    let timer: ClockTimer | undefined
    try {
      const unanswered = new Promise<never>((_resolve, reject) => {
        timer = this.clock.setTimeout(() => { reject(new Error(`ping unanswered after ${this.timeoutMs} ms`)) }, this.timeoutMs)
      })
      const ping = (this.ping as (timeoutMs: number) => Promise<unknown>)(this.timeoutMs)
      ping.catch(() => {}) // abandoned when unanswered in time
      await Promise.race([ping, unanswered])
      if (sentAt > this.#sentAt) {
        this.#sentAt = sentAt
        this.#repliedAt = this.clock.now()
      }
    } catch {
      // not reachable yet: ask again shortly (ref'd: writes wait behind this fence; stop() ends it)
      await new Promise<void>(resolve => {
        const done = (): void => { this.#pause = null; resolve() }
        this.#pause = { timer: this.clock.setTimeout(done, this.retryMs), done }
      })
    } finally {
      if (timer !== undefined) this.clock.clearTimeout(timer)
    }
  }
}
