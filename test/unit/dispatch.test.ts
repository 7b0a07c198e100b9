import { setImmediate as turnEnd } from 'node:timers/promises'
import { describe, expect, it, vi } from 'vitest'
import type { Db } from 'mongodb'
import { WriteBuffer, type WriteBufferOptions } from '../../src/index.js'

/** Just enough of a Db: every bulkWrite is recorded and answered when the test says so. */
function sink () {
  const calls: Array<{ ops: number, answer: () => void }> = []
  const db = {
    collection: (name: string) => ({
      collectionName: name,
      bulkWrite: (models: unknown[]) => new Promise(resolve => {
        calls.push({ ops: models.length, answer: () => { resolve({ upsertedIds: {} }) } })
      }),
    }),
  } as unknown as Db
  return { db, calls }
}

function buffer (db: Db, options?: WriteBufferOptions): WriteBuffer {
  return new WriteBuffer(db, options)
}

/** Lets every pending microtask run (but no macrotask). */
async function microtasks (): Promise<void> {
  for (let i = 0; i < 10; i++) await Promise.resolve()
}

/** After an answer: lets the buffer handle it (microtasks), then the end of that turn (a batch's return pumps there). */
async function returnTurn (): Promise<void> {
  await microtasks()
  await turnEnd()
}

/** Answers a recorded bulkWrite and waits out the turn of its return. */
async function answered (call: { answer: () => void } | undefined): Promise<void> {
  call?.answer()
  await returnTurn()
}

describe('dispatch (adaptive, lingerMs 0)', () => {
  it('an idle collection sends at the end of the turn in which writes were queued, all of them in one batch', async () => {
    const { db, calls } = sink()
    const c = buffer(db).collection('c')
    const writes = [c.insertOne({ i: 0 }), c.insertOne({ i: 1 })]
    await microtasks()
    writes.push(c.insertOne({ i: 2 })) // a continuation in the same turn still joins
    expect(calls).toHaveLength(0)
    await turnEnd()
    expect(calls.map(x => x.ops)).toEqual([3])
    calls[0]?.answer()
    await Promise.all(writes)
  })

  // Not in a microtask (a rule changed for speed, issue 26): the returned batch's callers turn
  // around first, in this turn, and what they queue joins; the driver's send, a chain of
  // microtasks, then does not wait behind their responses (dispatcher.ts's header has the numbers)
  it('writes gather while a batch is in flight and go at the end of the turn in which it returns, with what its callers queue', async () => {
    const { db, calls } = sink()
    const c = buffer(db).collection('c')
    const first = c.insertOne({ i: 0 })
    await turnEnd()
    expect(calls).toHaveLength(1)
    const gathered = Array.from({ length: 5 }, (_, i) => c.insertOne({ i }))
    await turnEnd()
    await turnEnd()
    expect(calls).toHaveLength(1) // nothing sent beside the batch in flight
    calls[0]?.answer()
    await first
    gathered.push(c.insertOne({ i: 5 })) // the returned write's caller writes again, in the same turn
    await microtasks()
    expect(calls).toHaveLength(1)
    await turnEnd()
    expect(calls.map(x => x.ops)).toEqual([1, 6]) // one batch, at the end of that turn: no timer
    calls[1]?.answer()
    await Promise.all(gathered)
  })

  // What a batch's command costs the driver in CPU is mostly fixed (130-170 µs): a few writes
  // wait one more turn, in which the requests their callers' answers bring are read (issue 26)
  it('a few writes gathered behind a returning batch wait for the end of the next turn and take in what it queues; 64 go at the end of this one', async () => {
    const { db, calls } = sink()
    const c = buffer(db).collection('c')
    const writes = [c.insertOne({ i: -1 })]
    await turnEnd()
    writes.push(...Array.from({ length: 3 }, (_, i) => c.insertOne({ i })))
    await answered(calls[0]) // the turn of the return ended, and queued nothing more
    expect(calls).toHaveLength(1)
    writes.push(c.insertOne({ i: 3 })) // a request read in the next turn
    await turnEnd()
    expect(calls.map(x => x.ops)).toEqual([1, 4])
    writes.push(...Array.from({ length: 64 }, (_, i) => c.insertOne({ i: 100 + i })))
    await answered(calls[1])
    expect(calls.map(x => x.ops)).toEqual([1, 4, 64])
    calls[2]?.answer()
    await Promise.all(writes)
  })

  it('a few writes do not wait a turn more while another collection waits for the slot: its full batch goes at the end of the turn of the return', async () => {
    const { db, calls } = sink()
    const wb = buffer(db, { maxInFlight: 1, maxBatchSize: 100 })
    const a = wb.collection('a')
    const b = wb.collection('b')
    const writes = [a.insertOne({ i: -1 })]
    await turnEnd()
    writes.push(a.insertOne({ i: 0 }))
    writes.push(...Array.from({ length: 100 }, (_, i) => b.insertOne({ i })))
    await returnTurn()
    expect(calls.map(x => x.ops)).toEqual([1]) // the one slot is taken
    await answered(calls[0])
    expect(calls.map(x => x.ops)).toEqual([1, 100])
    await answered(calls[1])
    expect(calls.map(x => x.ops)).toEqual([1, 100, 1])
    calls[2]?.answer()
    await Promise.all(writes)
  })

  it('a full batch goes at once (same turn) even while another is in flight, within maxInFlight', async () => {
    const { db, calls } = sink()
    const c = buffer(db, { maxBatchSize: 10, maxInFlight: 2 }).collection('c')
    const writes = [c.insertOne({ i: -1 })]
    await turnEnd()
    expect(calls).toHaveLength(1)
    for (let i = 0; i < 35; i++) writes.push(c.insertOne({ i }))
    await microtasks()
    expect(calls.map(x => x.ops)).toEqual([1, 10]) // one slot was free: one full batch
    await answered(calls[0])
    expect(calls.map(x => x.ops)).toEqual([1, 10, 10])
    for (let k = 1; calls.length < 5 && k < 10; k++) {
      calls[k]?.answer()
      await microtasks()
      await turnEnd()
    }
    expect(calls.map(x => x.ops)).toEqual([1, 10, 10, 10, 5])
    for (const call of calls) call.answer()
    await Promise.all(writes)
  })

  it('collections are independent: one in flight does not hold another back', async () => {
    const { db, calls } = sink()
    const wb = buffer(db)
    const a = wb.collection('a')
    const b = wb.collection('b')
    const writes = [a.insertOne({ x: 1 })]
    await turnEnd()
    writes.push(b.insertOne({ x: 2 }))
    await turnEnd()
    expect(calls).toHaveLength(2)
    for (const call of calls) call.answer()
    await Promise.all(writes)
  })

  it('never more than maxInFlight bulkWrites on the wire', async () => {
    const { db, calls } = sink()
    const wb = buffer(db, { maxInFlight: 2 })
    const writes = ['a', 'b', 'c', 'd'].map(name => wb.collection(name).insertOne({ name }))
    await turnEnd()
    expect(calls).toHaveLength(2)
    expect(wb.stats().inFlight).toBe(2)
    await answered(calls[0])
    expect(calls).toHaveLength(3)
    for (let k = 1; k < 4; k++) await answered(calls[k])
    await Promise.all(writes)
    expect(calls).toHaveLength(4)
  })

  // the pipelining size (500): a batch that large pays for its command, so it need not wait
  describe('pipelining size', () => {
    const inserts = (c: ReturnType<WriteBuffer['collection']>, n: number): Array<Promise<unknown>> =>
      Array.from({ length: n }, (_, i) => c.insertOne({ i }))

    it('500 writes gathered behind a batch in flight go at once, beside it; 499 wait for its return', async () => {
      const { db, calls } = sink()
      const c = buffer(db).collection('c')
      const writes: Array<Promise<unknown>> = [c.insertOne({ i: -1 })]
      await turnEnd()
      writes.push(...inserts(c, 499))
      await turnEnd()
      await turnEnd()
      expect(calls.map(x => x.ops)).toEqual([1]) // below the size: group commit, it gathers
      writes.push(c.insertOne({ i: 499 }))
      await microtasks()
      expect(calls.map(x => x.ops)).toEqual([1, 500]) // the 500th: it goes without waiting a turn
      for (const call of calls) call.answer()
      await Promise.all(writes)
    })

    it('at least twice as many gathered with nothing in flight go as two halves, both at once', async () => {
      const { db, calls } = sink()
      const c = buffer(db).collection('c')
      const writes = inserts(c, 1200)
      await turnEnd()
      expect(calls.map(x => x.ops)).toEqual([600, 600]) // not 1,000 now and 200 after its return
      for (const call of calls) call.answer()
      await Promise.all(writes)
    })

    it('fewer than twice go as one batch, and maxBatchSize still bounds a batch', async () => {
      const { db, calls } = sink()
      const wb = buffer(db)
      const writes = inserts(wb.collection('a'), 999)
      writes.push(...inserts(wb.collection('b'), 2500))
      await turnEnd()
      // a: one batch; b: 2,500 ≥ twice maxBatchSize, so a full batch first, then the 1,500 left as halves
      expect(calls.map(x => x.ops)).toEqual([999, 1000, 750, 750])
      for (const call of calls) call.answer()
      await Promise.all(writes)
    })

    it('only fresh inserts count: 600 updates of a document held by the batch out send nothing more, nor does an insert after them', async () => {
      const { db, calls } = sink()
      const c = buffer(db, { coalesce: false }).collection('c')
      const writes: Array<Promise<unknown>> = [c.updateOne({ _id: 1 }, { $inc: { n: 1 } })]
      await turnEnd()
      for (let i = 0; i < 600; i++) writes.push(c.updateOne({ _id: 1 }, { $inc: { n: 1 } }))
      writes.push(c.insertOne({ i: 0 }))
      await turnEnd()
      await turnEnd()
      expect(calls.map(x => x.ops)).toEqual([1]) // not a one-write batch beside it per write queued
      for (let k = 0; k < calls.length; k++) { // each update of the document waits for the one before
        calls[k]?.answer()
        await microtasks()
        await turnEnd()
      }
      await Promise.all(writes)
      expect(calls.map(x => x.ops).filter(n => n !== 1)).toEqual([]) // one write per batch, in turn: 602
    })

    it('an ordered collection and maxInFlight 1 send 1,000 gathered inserts as one batch, not halves', async () => {
      for (const [options, ordered] of [[{}, true], [{ maxInFlight: 1 }, false]] as const) {
        const { db, calls } = sink()
        const c = buffer(db, options).collection('c', { ordered })
        const writes = inserts(c, 1000)
        await turnEnd()
        expect(calls.map(x => x.ops)).toEqual([1000])
        calls[0]?.answer()
        await Promise.all(writes)
      }
    })

    it('lingerMs > 0 is untouched: 1,200 queued send a full batch, the rest lingers', async () => {
      const { db, calls } = sink()
      const wb = buffer(db, { lingerMs: 60_000 })
      const writes = inserts(wb.collection('c'), 1200)
      await turnEnd()
      expect(calls.map(x => x.ops)).toEqual([1000])
      const flushed = wb.flush()
      await microtasks()
      expect(calls.map(x => x.ops)).toEqual([1000, 200])
      for (const call of calls) call.answer()
      await Promise.all([...writes, flushed])
    })

    it('under a maxBatchSize below it, the rule is as before: full batches go, the rest gathers', async () => {
      const { db, calls } = sink()
      const c = buffer(db, { maxBatchSize: 400 }).collection('c')
      const writes = inserts(c, 1000)
      await turnEnd()
      expect(calls.map(x => x.ops)).toEqual([400, 400])
      await answered(calls[0])
      expect(calls).toHaveLength(2) // the collection still has a batch out
      await answered(calls[1])
      expect(calls.map(x => x.ops)).toEqual([400, 400, 200])
      for (const call of calls) call.answer()
      await Promise.all(writes)
    })
  })
})

describe('dispatch (lingerMs > 0)', () => {
  it('holds writes up to lingerMs for company, then sends them together', async () => {
    // the linger on a fake clock: on a loaded machine a real 10 ms sleep outlasted the 40 ms
    // linger, and the first write had gone alone before the second came
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date', 'performance'] })
    try {
      const { db, calls } = sink()
      const c = buffer(db, { lingerMs: 40 }).collection('c')
      const t0 = performance.now()
      const writes = [c.insertOne({ i: 0 })]
      await turnEnd()
      await vi.advanceTimersByTimeAsync(10)
      writes.push(c.insertOne({ i: 1 }))
      expect(calls).toHaveLength(0)
      while (calls.length === 0) {
        await vi.advanceTimersByTimeAsync(2)
        await turnEnd()
      }
      expect(performance.now() - t0).toBeGreaterThanOrEqual(35)
      expect(calls.map(x => x.ops)).toEqual([2])
      calls[0]?.answer()
      await Promise.all(writes)
    } finally {
      vi.useRealTimers()
    }
  })

  it('a full batch does not wait for the linger', async () => {
    const { db, calls } = sink()
    const c = buffer(db, { lingerMs: 60_000, maxBatchSize: 4 }).collection('c')
    const writes = Array.from({ length: 4 }, (_, i) => c.insertOne({ i }))
    await microtasks()
    expect(calls.map(x => x.ops)).toEqual([4])
    calls[0]?.answer()
    await Promise.all(writes)
  })

  it('flush() sends lingering writes at once', async () => {
    const { db, calls } = sink()
    const wb = buffer(db, { lingerMs: 60_000 })
    const write = wb.collection('c').insertOne({ i: 0 })
    const flushed = wb.flush()
    await microtasks()
    expect(calls).toHaveLength(1)
    calls[0]?.answer()
    await Promise.all([write, flushed])
  })
})

describe('dispatch with writes waiting to be retried', () => {
  it('a batch in its retry backoff does not hold back other documents of its collection', async () => {
    const calls = { n: 0 }
    const db = {
      collection: (name: string) => ({
        collectionName: name,
        bulkWrite: async () => {
          calls.n++
          if (calls.n === 1) throw Object.defineProperty(new Error('no server'), 'name', { value: 'MongoServerSelectionError' })
          return { upsertedIds: {} }
        },
      }),
    } as unknown as Db
    const c = buffer(db, { retry: { baseDelayMs: 5_000, maxDelayMs: 5_000, maxAttempts: 2 } }).collection('c')
    const first = c.insertOne({ _id: 'x' })
    while (calls.n < 1) await turnEnd()
    await turnEnd()
    const t0 = performance.now()
    await c.insertOne({ _id: 'other' }) // not the same document: must not wait ~2.5-5 s
    expect(performance.now() - t0).toBeLessThan(1_000)
    await expect(first).resolves.toEqual({ insertedId: 'x' })
  }, 15_000)

  it('a bulkWrite that throws instead of rejecting settles its writes and frees its slot', async () => {
    let calls = 0
    const db = {
      collection: (name: string) => ({
        collectionName: name,
        bulkWrite: (): Promise<unknown> => {
          if (++calls === 1) throw new TypeError('sync throw')
          return Promise.resolve({ upsertedIds: {} })
        },
      }),
    } as unknown as Db
    const wb = buffer(db, { retry: { maxAttempts: 1 } })
    const c = wb.collection('c')
    await expect(c.insertOne({ a: 1 })).rejects.toMatchObject({ code: 'WRITE_BUFFER_BATCH_FAILED' })
    await expect(c.insertOne({ a: 2 })).resolves.toBeDefined()
    expect(wb.stats().inFlight).toBe(0)
  })
})

describe('lingering writes', () => {
  it('a lingering write with writes coalesced into it, coalesced in turn into an earlier write: all settle, once', async () => {
    const models: unknown[] = []
    const db = {
      collection: (name: string) => ({
        collectionName: name,
        bulkWrite: async (m: unknown[]) => { models.push(...m); return { upsertedIds: {} } },
      }),
    } as unknown as Db
    const wb = buffer(db, { lingerMs: 60_000 }) // nothing goes before flush()
    const c = wb.collection('c')
    const first = c.updateOne({ _id: 1 }, { $inc: { n: 1 } })
    const lingering = c.updateOne({ _id: 1 }, { $inc: { n: 10 } }, { lingerMs: 60_000 })
    const joined = c.updateOne({ _id: 1 }, { $inc: { n: 100 } }, { lingerMs: 60_000 }) // into `lingering` as it arrives
    await wb.flush() // takes `first`, and `lingering` (with `joined`) coalesces into it
    await expect(Promise.all([first, lingering, joined])).resolves.toEqual([{}, {}, {}])
    expect(models).toEqual([{ updateOne: { filter: { _id: 1 }, update: { $inc: { n: 111 } } } }])
    expect(wb.stats()).toMatchObject({ pending: 0, flushedOps: 3, coalescedOps: 2 })
  })
})
