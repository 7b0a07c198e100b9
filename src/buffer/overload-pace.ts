/**
 * The pace the buffer keeps while the server says it is overloaded: the rule, pure. It is told
 * each batch sent, each acknowledged and each overload answer, with the time (`now`, in ms, from
 * whatever clock its caller reads: it reads none), and answers `nextAt`, the clock time before
 * which no batch may be sent; the Dispatcher, the one place that decides when to send, obeys it.
 *
 * Why a pace, beside the in-flight limit: a server that refuses work (MongoDB 8's ingress rate
 * limiter answers 462 once its token bucket is empty) is not helped by fewer batches on the wire
 * alone. One batch resent as soon as its backoff ends meets the same empty bucket; the buffer
 * then spends commands on refusals (measured, bench overload (b): 3 commands sent per command
 * accepted with the in-flight limit alone, 5.6 with a fixed 4). What helps is sending no faster
 * than the server accepts, which only its answers tell. So, as TCP paces and probes:
 * - at the first overload answer the pace starts at the rate the server acknowledged writes at
 *   over the last RATE_WINDOW_MS, and at least a full batch (maxBatchSize) per RATE_WINDOW_MS:
 *   a batch of n writes then holds the next send back n ÷ rate ms (read at the rate of the
 *   moment: a speed-up shortens a wait begun). Too fast a start costs a few refusals (DOWN is
 *   quick); too slow a one costs a few round trips of slow start (UP_FIRST);
 * - each acknowledged batch that had waited for the pace (a probe: the pace, not the load,
 *   decided when it went) speeds it up by UP (UP_FIRST until it is first slowed, as TCP's slow
 *   start: the rate it started at may be that of the calm before); each overload answer slows it by DOWN, at most
 *   once per cut (answers to batches sent before the last cut answer the same cause, as the
 *   in-flight limit halves once per burst). It settles just under the rate the server accepts:
 *   a refusal about every ln(1/DOWN) ÷ ln(UP) probes (10: sent ÷ accepted about 1.1);
 * - the batch refused first goes again its writes' time at the pace later (the server had just
 *   run out: × 1-1.1, jittered); one refused while paced, RETRY_SHARE of that (× 0.5-1.5): the
 *   pace was a little too fast, so the server lacked a little, not everything, and a full wait
 *   would leave what it can take unused;
 * - QUIET_MS after both the last overload answer and the last time it held a batch back, the
 *   pace ends (a batch acknowledged then ends it): the server takes all the buffer sends. Not
 *   after the last overload answer alone: a pace that holds the rate just under the server's
 *   meets a refusal only every ten probes or so, and ending it between them let a burst out;
 * Measured per batch, never per write. Writes whose deadline the pace cannot meet are refused
 * at the door by the service rate (service-rate.ts), or told by their deadline.
 */

/** The rate is multiplied by this per acknowledged probe... */
export const UP = 1.01
/** ...or by this until the pace is first slowed (the rate it started at may be the calm before the overload, or a guess). */
export const UP_FIRST = 1.5
/** ...and by this per overload answer (once per cut). */
export const DOWN = 0.9
/** A refused batch is resent after this share of its writes' time at the pace (jittered). */
export const RETRY_SHARE = 0.1
/** The pace ends this long after the last overload answer and the last batch it held back. */
export const QUIET_MS = 5_000
/** The first pace is the rate writes were acknowledged at over the last this long. */
export const RATE_WINDOW_MS = 1_000

export class OverloadPace {
  /** writes per ms while pacing; 0: no pace */
  #rate = 0
  /**
   * The gate, read with the rate of the moment (so a probe that speeds the pace up shortens the
   * wait already begun): no batch goes before `#from + #held / #rate` (the time at the pace of
   * the writes sent last, from when they went), nor before `#notBefore` (a refused batch's resend)
   */
  #from = 0
  #held = 0
  #notBefore = 0
  #lastOverloadAt = -Infinity
  /** when the pace began: answers to batches sent before then neither slow it nor move it */
  #startedAt = 0
  /** when the rate was last cut: overload answers to batches sent before then cut it no further */
  #cutAt = -Infinity
  /** batches acknowledged in the last RATE_WINDOW_MS, oldest first: when, and how many writes (the first pace's rate) */
  #ackedAt: number[] = []
  #ackedWrites: number[] = []
  #ackedHead = 0
  #acked = 0
  /** a send waited for the pace since the last batch went */
  #waited = false
  /** when the pace last held a batch back */
  #waitedAt = -Infinity
  /** batches sent after waiting for the pace, not yet answered: each acknowledged one speeds it up */
  #probes = 0
  /** overload answers that slowed the pace, and acknowledged probes that sped it up (stats, tests) */
  slowed = 0
  sped = 0
  /** the pace was slowed since it started: it probes by UP from then on */
  slowedSinceStart = false

  /** `fullBatch`: the most writes a batch holds (maxBatchSize): the pace starts at no less than one such batch per RATE_WINDOW_MS */
  constructor (readonly fullBatch: number) {}

  /** Clock time before which no batch may be sent; 0: no pace. */
  get nextAt (): number { return this.#rate === 0 ? 0 : Math.max(this.#from + this.#held / this.#rate, this.#notBefore) }

  /** Writes per ms the pace allows; 0: no pace (stats, tests). */
  get rate (): number { return this.#rate }

  /** The Dispatcher held writes back for the pace at `now`: the next batch sent is a probe. */
  waited (now: number): void {
    this.#waited = true
    this.#waitedAt = now
  }

  /** A batch of `writes` writes was sent. */
  sent (now: number, writes: number): void {
    if (this.#rate === 0) return
    // the gate had opened (the Dispatcher sends nothing before it): the time held starts over with this batch
    this.#from = now
    this.#held = writes
    if (this.#waited) {
      this.#probes++
      this.#waited = false
    }
  }

  /** A batch of `writes` writes was acknowledged. */
  acknowledged (now: number, writes: number): void {
    if (this.#rate === 0) {
      this.#ackedAt.push(now)
      this.#ackedWrites.push(writes)
      this.#acked += writes
      this.#forget(now)
      return
    }
    if (now - Math.max(this.#lastOverloadAt, this.#waitedAt) >= QUIET_MS) {
      this.#end()
      return
    }
    if (this.#probes > 0) {
      this.#probes--
      this.#rate *= this.slowedSinceStart ? UP : UP_FIRST
      this.sped++
    }
  }

  /**
   * The server answered a batch of `writes` writes, sent at `sentAt`, that it is overloaded.
   * `jitter`, in [0, 1): where in ×0.5-1.5 the resend falls.
   */
  overloaded (now: number, writes: number, sentAt: number, jitter: number): void {
    this.#lastOverloadAt = now
    if (this.#rate === 0) {
      this.#forget(now)
      this.#rate = Math.max(this.#acked, writes, this.fullBatch) / RATE_WINDOW_MS
      this.#ackedAt = []
      this.#ackedWrites = []
      this.#ackedHead = 0
      this.#acked = 0
      this.#startedAt = now
      this.#cutAt = now
      this.slowedSinceStart = false
      // the server just ran out: the refused batch waits its whole time at the pace
      this.#from = now
      this.#held = writes
      this.#notBefore = now + (writes / this.#rate) * (1 + RETRY_SHARE * jitter)
      return
    }
    // sent before the pace began, in the burst that met the first refusal: the same cause, and
    // it holds no time of the pace; it goes again in turn
    if (sentAt <= this.#startedAt) return
    if (this.#probes > 0) this.#probes--
    if (sentAt > this.#cutAt) {
      this.#rate *= DOWN
      this.#cutAt = now
      this.slowed++
      this.slowedSinceStart = true
    }
    // the time it held is free again (the server took nothing), unless a later batch holds the gate now
    if (this.#from === sentAt) this.#held = Math.max(0, this.#held - writes)
    this.#notBefore = Math.max(this.#notBefore, now + RETRY_SHARE * (writes / this.#rate) * (0.5 + jitter))
  }

  /** Drops the acknowledgments older than RATE_WINDOW_MS. */
  #forget (now: number): void {
    const at = this.#ackedAt
    let head = this.#ackedHead
    while (head < at.length && (at[head] as number) <= now - RATE_WINDOW_MS) this.#acked -= this.#ackedWrites[head++] as number
    if (head > 64 && head * 2 > at.length) {
      this.#ackedAt = at.slice(head)
      this.#ackedWrites = this.#ackedWrites.slice(head)
      head = 0
    }
    this.#ackedHead = head
  }

  #end (): void {
    this.#rate = 0
    this.#from = 0
    this.#held = 0
    this.#notBefore = 0
    this.#probes = 0
    this.#waited = false
  }
}
