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
 *   over the last RATE_WINDOW_MS (at least the refused batch's writes per RATE_WINDOW_MS): a
 *   batch of n writes then holds the next send back n ÷ rate ms, read at the rate of the moment
 *   (a speed-up shortens a wait begun), and never more than MAX_HOLD_MS (a server refusing
 *   everything for a minute must not leave a pace of a few writes a second behind it). Too fast
 *   a start costs a few refusals; too slow a one a few answers of slow start (UP_FIRST). A pace
 *   that starts within QUIET_MS of the last one's end starts slowed (its rate is known);
 * - each acknowledged batch that had waited for the pace (a probe: the pace, not the load,
 *   decided when it went) speeds it up by UP (UP_FIRST until it is first slowed, as TCP's slow
 *   start: the rate it started at may be that of the calm before); an overload answer slows it
 *   by DOWN, once per cut (answers to batches sent before the last cut, in flight then, answer
 *   the same cause, as the in-flight limit halves once per burst). It settles just under the
 *   rate the server accepts: a refusal about every ln(1/DOWN) ÷ ln(UP) probes (10: sent ÷
 *   accepted about 1.1). After REPROBE_AFTER probes with no refusal it probes by UP_FIRST again
 *   (the overload may be over: a burst then must not crawl up by 1% a batch). It never grows
 *   past MAX_GROWTH times the writes acknowledged over the last RATE_WINDOW_MS (or the batch):
 *   past that it holds nothing back anyway;
 * - a refused batch leaves the gate where its send put it: the next batch goes the refused
 *   one's time at the pace after it went, as if it had been taken (resending a tenth of that
 *   time later cut the pace at refusals it did not earn: the server had run out, and the next
 *   batch may be larger; bench overload (b) then served 0.7x the bucket's rate). The batch
 *   refused first waits its whole time from the refusal, × 1-1.1 (jittered: buffers of several
 *   app instances refused at once do not come back at once);
 * - QUIET_MS after the last overload answer the pace ends (the first batch acknowledged then
 *   ends it). A pace held just under the server's rate meets a refusal every ten probes or so;
 *   if it ends between two, the next refusal starts it again, from what was acknowledged over
 *   the last second (that rate) and slowed. (Ending it only once it had also held nothing back
 *   for QUIET_MS kept it for good: it holds back the second of two batches sent in one turn.)
 * Measured per batch, never per write. Writes whose deadline the pace cannot meet are refused
 * at the door by the service rate (service-rate.ts), or told by their deadline.
 */

/** The rate is multiplied by this per acknowledged probe... */
export const UP = 1.01
/** ...or by this until the pace is first slowed (the rate it started at may be the calm before the overload, or a guess). */
export const UP_FIRST = 1.5
/** ...and by this per overload answer (once per cut). */
export const DOWN = 0.9
/** The batch refused first waits its writes' time at the pace × 1 to 1 + this (jittered). */
export const START_JITTER = 0.1
/** The pace ends this long after the last overload answer. */
export const QUIET_MS = 10_000
/** After this many acknowledged probes with no overload answer, the pace probes by UP_FIRST again. */
export const REPROBE_AFTER = 20
/** The first pace is the rate writes were acknowledged at over the last this long. */
export const RATE_WINDOW_MS = 1_000
/** No batch holds the next one back longer than this. */
export const MAX_HOLD_MS = 2_000
/** The pace grows to at most this many times the writes acknowledged over the last RATE_WINDOW_MS. */
export const MAX_GROWTH = 4

export class OverloadPace {
  /** writes per ms while pacing; 0: no pace */
  #rate = 0
  /**
   * The gate, read with the rate of the moment (so a probe that speeds the pace up shortens the
   * wait already begun): no batch goes before `#from + #held / #rate` (the time at the pace of
   * the writes sent last, from when they went), nor before `#notBefore` (the first refused batch's jittered wait)
   */
  #from = 0
  #held = 0
  #notBefore = 0
  #lastOverloadAt = -Infinity
  /** when the last pace ended */
  #endedAt = -Infinity
  /** when the pace began: answers to batches sent before then neither slow it nor move it */
  #startedAt = 0
  /** when the pace was last cut (or began): answers to batches sent before then cut it no further */
  #cutAt = 0
  /** batches acknowledged in the last RATE_WINDOW_MS, oldest first: when, and how many writes (the first pace's rate) */
  #ackedAt: number[] = []
  #ackedWrites: number[] = []
  #ackedHead = 0
  #acked = 0
  /** a send waited for the pace since the last batch went */
  #waited = false
  /** batches sent after waiting for the pace, not yet answered: each acknowledged one speeds it up */
  #probes = 0
  /** overload answers that slowed the pace, and acknowledged probes that sped it up (stats, tests) */
  slowed = 0
  sped = 0
  /** acknowledged probes since the pace was last slowed */
  #probesSinceCut = 0
  /** the pace was slowed since it started (or started within QUIET_MS of the last one's end): it probes by UP */
  #slowed = false

  /** Whether it probes by UP (slowed since it started, or started soon after the last pace) rather than UP_FIRST (tests). */
  get slowedSinceStart (): boolean { return this.#slowed }

  /** Clock time before which no batch may be sent; 0: no pace. */
  get nextAt (): number {
    if (this.#rate === 0) return 0
    return Math.max(this.#from + Math.min(this.#held / this.#rate, MAX_HOLD_MS), this.#notBefore)
  }

  /** Writes per ms the pace allows; 0: no pace (stats, tests). */
  get rate (): number { return this.#rate }

  /** The Dispatcher held writes back for the pace: the next batch sent is a probe. */
  waited (): void { this.#waited = true }

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
    this.#ackedAt.push(now)
    this.#ackedWrites.push(writes)
    this.#acked += writes
    this.#forget(now)
    if (this.#rate === 0) return
    if (now - this.#lastOverloadAt >= QUIET_MS) {
      this.#end(now)
      return
    }
    if (this.#probes > 0) {
      this.#probes--
      const ceiling = MAX_GROWTH * Math.max(this.#acked, writes) / RATE_WINDOW_MS
      if (this.#rate < ceiling) {
        this.#rate = Math.min(ceiling, this.#rate * (this.#slowed && ++this.#probesSinceCut < REPROBE_AFTER ? UP : UP_FIRST))
        this.sped++
      }
    }
  }

  /**
   * The server answered a batch of `writes` writes, sent at `sentAt`, that it is overloaded.
   * `jitter`, in [0, 1): where in ×1 to 1 + START_JITTER the first refused batch's wait falls.
   */
  overloaded (now: number, writes: number, sentAt: number, jitter: number): void {
    this.#lastOverloadAt = now
    writes = Math.max(1, writes)
    if (this.#rate === 0) {
      this.#forget(now)
      this.#rate = Math.max(this.#acked, writes) / RATE_WINDOW_MS
      this.#startedAt = now
      // a pace that ended a moment ago was just under the server's rate: so is what it acknowledged
      this.#slowed = now - this.#endedAt < QUIET_MS
      // the server just ran out: the refused batch waits its whole time at the pace
      this.#from = now
      this.#held = writes
      this.#notBefore = now + (writes / this.#rate) * (1 + START_JITTER * jitter)
      this.#cutAt = now
      return
    }
    // sent before the pace began, in the burst that met the first refusal: the same cause, and
    // it holds no time of the pace; it goes again in turn
    if (sentAt <= this.#startedAt) return
    if (this.#probes > 0) this.#probes--
    if (sentAt > this.#cutAt) {
      // sent at the pace and refused: the pace is a little fast
      this.#rate *= DOWN
      this.#probesSinceCut = 0
      this.slowed++
      this.#slowed = true
      this.#cutAt = now
    }
    // else: in flight when the pace was last cut, the same cause; it goes again in turn
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

  #end (now: number): void {
    this.#endedAt = now
    this.#rate = 0
    this.#from = 0
    this.#held = 0
    this.#notBefore = 0
    this.#probes = 0
    this.#probesSinceCut = 0
    this.#waited = false
  }
}
