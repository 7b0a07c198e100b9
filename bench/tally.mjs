// Server-side counts for one route: what the handlers acknowledged, and a way to wait
// until no handler is still running (autocannon stops with requests still in flight).
import { setTimeout as sleep } from 'node:timers/promises'

export class Tally {
  active = 0
  acked = 0
  failed = 0

  /** Wraps an async handler: counts it running, and `acked` when it resolved. */
  track (handler) {
    return async (req, reply) => {
      this.active++
      try {
        const out = await handler(req, reply)
        this.acked++
        return out
      } catch (err) {
        this.failed++
        throw err
      } finally {
        this.active--
      }
    }
  }

  async idle () {
    while (this.active > 0) await sleep(10)
  }
}
