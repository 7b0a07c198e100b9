// The stub Db of the suites that measure our code alone (scale-dispatch, self-time, the CPU
// account's in-process route): its bulkWrite answers after one setImmediate, as a server that
// costs nothing would — or, with `answerAfterMs()`, after waits that average that many ms (read
// per batch), as a server with that round trip and no CPU would; no driver. And `groupWait`, the
// CPU account's batcher that is not this library.
const ANSWER = { insertedCount: 0, matchedCount: 0, modifiedCount: 0, deletedCount: 0, upsertedCount: 0, upsertedIds: {}, insertedIds: {} }

/**
 * Waits that average `target()` ms, as a server with that round trip would take. Node's timers
 * count whole milliseconds (1.88 is run as 1) and fire late by the event loop's delay, so each
 * wait is the target less the lateness seen so far (a moving average, 1/16 per wait), rounded up
 * or down at random in proportion to its fraction. Targets under about 1 ms come out at 1 ms or
 * more: Node waits at least 1 ms.
 */
function roundTrips (target) {
  let late = 0
  return () => new Promise(resolve => {
    const asked = Math.max(0, target() - late)
    const whole = Math.floor(asked)
    const ms = Math.random() < asked - whole ? whole + 1 : whole
    const start = performance.now()
    setTimeout(() => {
      late += (performance.now() - start - ms - late) / 16
      resolve(ANSWER)
    }, ms)
  })
}

export function stubDb ({ answerAfterMs } = {}) {
  const answer = answerAfterMs === undefined
    ? () => new Promise(resolve => setImmediate(resolve, ANSWER))
    : roundTrips(answerAfterMs)
  const collections = new Map()
  return {
    databaseName: 'stub',
    command: async () => ({ ok: 1 }),
    collection (name) {
      let c = collections.get(name)
      if (c === undefined) {
        c = { collectionName: name, bulkWrite: answer }
        collections.set(name, c)
      }
      return c
    },
  }
}

/**
 * Group commit in a few lines, no library, with the buffer's rule: `wait(doc)` joins the open
 * batch (holding the document until it returns, as a batcher would), which goes at the end of the
 * turn when fewer than `inFlight` batches are out, else when one returns: at the end of that turn,
 * or of the next if fewer than `company` gathered (the Dispatcher's COMPANY). It comes back after
 * the same round trips as the stub Db's. What any batcher with that many batches in flight
 * reaches at that round trip if its writes cost nothing (the stub's round trip does not grow with
 * two batches at the server, as a server's would). `stats()` counts as the buffer's.
 */
export function groupWait ({ answerAfterMs, inFlight = 1, company = 64 }) {
  const roundTrip = roundTrips(answerAfterMs)
  const counts = { batches: 0, flushedOps: 0 }
  let open = []
  let docs = []
  let out = 0
  const send = () => {
    if (out >= inFlight || open.length === 0) return
    const batch = open
    const held = docs
    open = []
    docs = []
    out++
    counts.batches++
    counts.flushedOps += batch.length
    roundTrip().then(() => {
      out--
      held.length = 0
      for (const resolve of batch) resolve()
      if (open.length >= company) setImmediate(send)
      else if (open.length > 0) setImmediate(() => setImmediate(send))
    })
  }
  return {
    wait: doc => new Promise(resolve => {
      open.push(resolve)
      docs.push(doc)
      if (out < inFlight && open.length === 1) setImmediate(send)
    }),
    stats: () => ({ ...counts }),
  }
}
