import type { Batch } from './batch.js'

export interface BackoffPolicy { baseDelayMs: number, maxDelayMs: number }

/**
 * Batches waiting to be sent again after a transient failure. While one waits, its queue
 * holds its targets (a later write to the same document must not overtake it); when the
 * wait is over its writes go back to the head of their queue and `ready` is called.
 */
export class Retries {
  readonly #waiting = new Set<Batch>()
  /** batches scheduled to be sent again (stats) */
  scheduled = 0

  constructor (readonly policy: BackoffPolicy, readonly ready: () => void) {}

  schedule (batch: Batch): void {
    const { baseDelayMs, maxDelayMs } = this.policy
    const cap = Math.min(maxDelayMs, baseDelayMs * 2 ** (batch.attempt - 1))
    const delay = cap / 2 + Math.random() * cap / 2 // jitter: no thundering herd on recovery
    this.scheduled++
    batch.queue.holdForRetry(batch)
    this.#waiting.add(batch)
    batch.retryTimer = setTimeout(() => {
      this.#waiting.delete(batch)
      batch.retryTimer = null
      batch.queue.endRetryWait(batch)
      this.ready()
    }, delay)
  }

  /** close() timed out: stops every wait and hands back the batches that were waiting. */
  removeAll (): Batch[] {
    const batches = [...this.#waiting]
    for (const batch of batches) {
      if (batch.retryTimer !== null) clearTimeout(batch.retryTimer)
      batch.retryTimer = null
      batch.queue.returned(batch)
    }
    this.#waiting.clear()
    return batches
  }
}
