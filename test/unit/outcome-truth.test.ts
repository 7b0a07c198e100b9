import { describe, expect, it } from 'vitest'
import { BSON, type Document, type ObjectId } from 'mongodb'
import { ErrorCodes, InvalidWriteError } from '../../src/index.js'
import { apply, bulkWriteError, commandError, hold, networkError, settle, type BulkCall, type Responder } from './fake-db.js'
import { advance, fastForward, harness, loose, useFakeClock } from './harness.js'

const NUL = String.fromCharCode(0)
const FAST = { retry: { baseDelayMs: 1 }, maxTimeMS: 200 }

/** Refuses the whole command (nothing applied) when one of its statements has `collation`, as DocumentDB does (code 115). */
const refuseCollation = (code: number): Responder => (call: BulkCall, db) => {
  if (call.bodies.some(b => b.collation !== undefined)) throw commandError(code)
  return apply(call, db)
}

/** Applies the first `n` statements (all without `n`), then refuses the whole command (`ok: 0`), as FerretDB did (docs/server-behaviours.md: `ok: 0` does not prove nothing was applied). */
const appliedThenRefused = (n?: number): Responder => call => {
  call.db.applyModels(call.collection, n === undefined ? call.raw : call.raw.slice(0, n), call.options.ordered === true)
  throw commandError(2, 'refused after applying')
}

function outcomes (results: Array<Awaited<ReturnType<typeof settle>>>): string[] {
  return results.map(r => r.status === 'fulfilled' ? 'ok' : `${String((r.reason as Document).code)}/${String((r.reason as Document).outcome)}`)
}

describe('a whole-command refusal is isolated to the write to blame', () => {
  it('MongoDB, a code raised before execution: nothing applied, so every write may go again — even $inc; the bad one fails alone, rejected, with the code', async () => {
    const { fake, wb, c } = harness(FAST)
    fake.fallback = refuseCollation(2)
    const writes = Array.from({ length: 51 }, (_, i) => settle(c.updateOne({ _id: i }, { $inc: { n: 1 } },
      i === 17 ? { upsert: true, collation: { locale: 'fr' } } : { upsert: true })))
    const results = outcomes(await Promise.all(writes))
    expect(results.filter(r => r === 'ok')).toHaveLength(50)
    expect(results[17]).toBe('2/rejected')
    expect(fake.docs('c')).toHaveLength(50)
    expect(fake.docs('c').every(d => d.n === 1)).toBe(true) // applied once each
    // 1 refused + halves down to the bad one: at most 2 per level, ⌈log2 51⌉ = 6 levels
    expect(fake.calls.length).toBeLessThanOrEqual(1 + 2 * 6)
    expect(wb.stats().isolatedBatches).toBe(1)
  })

  it('not MongoDB: a refusal proves nothing — retry-safe writes go again and the bad one is pinned (unknown, code kept); a $inc is told unknown, never resent', async () => {
    const { fake, c } = harness(FAST)
    fake.server = 'ferretdb'
    fake.fallback = refuseCollation(115)
    const writes = Array.from({ length: 50 }, (_, i) => settle(c.updateOne({ _id: i }, { $set: { v: i } }, { upsert: true })))
    const bad = settle(c.updateOne({ _id: 'bad' }, { $set: { v: 0 } }, { upsert: true, collation: { locale: 'fr' } }))
    const inc = settle(c.updateOne({ _id: 'inc' }, { $inc: { n: 1 } }, { upsert: true }))
    const results = outcomes(await Promise.all([...writes, bad, inc]))
    expect(results.slice(0, 50).every(r => r === 'ok')).toBe(true)
    expect(results[50]).toBe('115/unknown')
    expect(results[51]).toBe('115/unknown')
    const incSent = fake.calls.filter(call => call.ids.includes('inc'))
    expect(incSent).toHaveLength(1)
    expect(fake.docs('c').map(d => d._id)).not.toContain('bad')
    expect(fake.docs('c')).toHaveLength(50)
  })

  it('not MongoDB: inserts a refused command had applied come back as duplicates of themselves when sent again: looked up, they are told applied, never rejected', async () => {
    const { fake, c } = harness(FAST)
    fake.server = 'ferretdb'
    fake.next(appliedThenRefused(3))
    const docs: Document[] = [{ a: 1 }, { a: 2 }, { a: 3 }, { a: 4 }]
    const results = await Promise.all(docs.map(d => settle(c.insertOne(d))))
    expect(outcomes(results)).toEqual(['ok', 'ok', 'ok', 'ok'])
    expect(results.map(r => r.status === 'fulfilled' && String(r.value.insertedId))).toEqual(docs.map(d => String(d._id)))
    expect(fake.docs('c')).toHaveLength(4) // each written once
    expect(fake.finds.length).toBeGreaterThan(0) // the duplicates were looked up, not assumed
  })

  it('not MongoDB: a caller\'s own _id that a refused command may have written comes back a duplicate when sent again: unknown, not rejected', async () => {
    const { fake, c } = harness(FAST)
    fake.server = 'ferretdb'
    fake.next(appliedThenRefused(1))
    const results = outcomes(await Promise.all([1, 2].map(i => settle(c.insertOne({ _id: i })))))
    // _id 1 was written by the refused attempt: its duplicate proves nothing about whose it is
    expect(results).toEqual(['11000/unknown', 'ok'])
    expect(fake.docs('c').map(d => d._id)).toEqual([1, 2])
  })

  it('an ordered collection: once a half stops at a refused write, the halves after it are not sent before the writes it left', async () => {
    const { fake, wb } = harness(FAST)
    const c = loose(wb.collection('o', { ordered: true }))
    // DocumentDB's rules: a collation refuses the whole command (115); the upsert of A fails its own
    // statement (11000), and an ordered command stops there
    fake.fallback = (call, db) => {
      if (call.bodies.some(b => b.collation !== undefined)) throw commandError(115)
      const bad = call.bodies.findIndex(b => (b.filter as Document | undefined)?._id === 'A')
      if (bad < 0) return apply(call, db)
      db.applyModels(call.collection, call.raw.slice(0, bad), true)
      throw bulkWriteError([{ index: bad, code: 11000 }])
    }
    fake.applyModels('o', [{ insertOne: { document: { _id: 'X' as unknown as ObjectId, v: 0 } } }], false)
    const writes = [
      c.updateOne({ _id: 'A', k: 1 }, { $set: { y: 1 } }, { upsert: true }), // a duplicate key of its own
      c.updateOne({ _id: 'X' }, { $set: { v: 1 } }),
      c.updateOne({ _id: 'X' }, { $set: { v: 2 } }), // submitted after the one before: it must land after it
      c.updateOne({ _id: 'D' }, { $set: { z: 1 } }, { collation: { locale: 'fr' } }), // refuses the whole command
    ].map(async p => await settle(p))
    const results = outcomes(await Promise.all(writes))
    expect(results).toEqual(['11000/rejected', 'ok', 'ok', '115/rejected'])
    expect(fake.docs('o').find(d => d._id === 'X')).toEqual({ _id: 'X', v: 2 }) // applied in submission order
  })

  it('an ordered collection, a refusal that proves nothing: with a write that is not retry-safe among them, none is resent (a $set resent after the $inc that followed it would undo it)', async () => {
    const { fake, wb } = harness(FAST)
    fake.server = 'ferretdb'
    const c = loose(wb.collection('o', { ordered: true }))
    fake.applyModels('o', [{ insertOne: { document: { _id: 'X' as unknown as ObjectId, v: 0 } } }], false)
    fake.next(appliedThenRefused()) // every statement applied, then refused
    const writes = [
      c.updateOne({ _id: 'X' }, { $set: { v: 1 } }),
      c.updateOne({ _id: 'X' }, { $inc: { v: 10 } }),
      c.updateOne({ _id: 'D' }, { $set: { z: 1 } }, { upsert: true }),
    ].map(async p => await settle(p))
    expect(outcomes(await Promise.all(writes))).toEqual(['2/unknown', '2/unknown', '2/unknown'])
    expect(fake.calls).toHaveLength(1)
    expect(fake.docs('o').find(d => d._id === 'X')).toEqual({ _id: 'X', v: 11 }) // as the refused command left it
  })

  it('close() that gave up waiting stops an isolation too: no half is sent after it, and its writes are told closed', async () => {
    const { fake, wb, c } = harness({ ...FAST, closeTimeoutMs: 50 })
    fake.next(refuseCollation(2), hold, hold) // the batch refused; its first half held on the wire (the second goes after it)
    const writes = [0, 1, 2, 3].map(i => settle(c.updateOne({ _id: i }, { $set: { v: i } }, i === 3 ? { collation: { locale: 'fr' } } : {})))
    await fake.waitForCalls(2)
    await wb.close() // gives up after 50 ms: the halves are still on the wire
    const sentBefore = fake.calls.length
    for (const call of fake.held) call.answer(refuseCollation(2)) // the half with the bad write is refused again
    const results = outcomes(await Promise.all(writes))
    expect(fake.calls.length).toBe(sentBefore) // nothing sent once close() resolved
    expect(results.slice(0, 2)).toEqual(['ok', 'ok'])
    expect(results.slice(2)).toEqual([`${ErrorCodes.CLOSED}/not-sent`, `${ErrorCodes.CLOSED}/not-sent`])
  })

  it('a refusal code the buffer does not know (Atlas answers a permission error as 8000), on every statement: two halves refused alike stop the split — at most 3 commands per batch, every write told once', async () => {
    const { fake, wb, c } = harness(FAST)
    fake.server = 'ferretdb'
    fake.fallback = () => { throw commandError(8000, 'user is not allowed to do action [update]') }
    const writes = Array.from({ length: 1_400 }, (_, i) => settle(c.updateOne({ _id: i }, { $set: { v: i } }, { upsert: true })))
    const results = outcomes(await Promise.all(writes))
    expect(new Set(results)).toEqual(new Set(['8000/unknown']))
    const batches = wb.stats().batches
    expect(batches).toBeGreaterThan(0)
    expect(fake.calls.length).toBeLessThanOrEqual(3 * batches) // before: 2,597 commands, halving down to single writes
    expect(fake.docs('c')).toHaveLength(0)
  })

  it('two bad writes of one known code (BadValue) in different halves: split down to them, their mates applied once', async () => {
    const { fake, c } = harness(FAST)
    fake.fallback = refuseCollation(2)
    const writes = Array.from({ length: 8 }, (_, i) => settle(c.updateOne({ _id: i }, { $inc: { n: 1 } },
      i === 1 || i === 6 ? { upsert: true, collation: { locale: 'fr' } } : { upsert: true })))
    const results = outcomes(await Promise.all(writes))
    expect(results.filter(r => r === 'ok')).toHaveLength(6)
    expect([results[1], results[6]]).toEqual(['2/rejected', '2/rejected']) // MongoDB, a code raised before execution
    expect(fake.docs('c')).toHaveLength(6)
    expect(fake.docs('c').every(d => d.n === 1)).toBe(true)
  })

  it('two bad writes of one unknown code in different halves: read as a refusal of the command (the price of stopping at 3 commands), every write told once, none applied', async () => {
    const { fake, c } = harness(FAST)
    fake.fallback = (call, db) => {
      if (call.bodies.some(b => b.collation !== undefined)) throw commandError(8000, 'unknown refusal')
      return apply(call, db)
    }
    const writes = Array.from({ length: 8 }, (_, i) => settle(c.updateOne({ _id: i }, { $set: { v: i } },
      i === 1 || i === 6 ? { upsert: true, collation: { locale: 'fr' } } : { upsert: true })))
    const results = outcomes(await Promise.all(writes))
    expect(fake.calls).toHaveLength(3)
    expect(new Set(results)).toEqual(new Set(['8000/unknown']))
    expect(fake.docs('c')).toHaveLength(0)
  })

  it('a refusal of the command itself (Unauthorized) is not split: one call, every write fails once', async () => {
    const { fake, c } = harness(FAST)
    fake.fallback = () => { throw commandError(13, 'not authorized') }
    const results = outcomes(await Promise.all([1, 2, 3, 4].map(i => settle(c.insertOne({ _id: i })))))
    expect(fake.calls).toHaveLength(1)
    expect(results).toEqual(Array(4).fill(`${ErrorCodes.BATCH_FAILED}/rejected`))
  })

  it('a transient refusal from a server that is not MongoDB (InternalError after part of the batch): retry-safe writes retried and applied, a $inc told unknown', async () => {
    useFakeClock()
    const { fake, c } = harness(FAST)
    fake.server = 'ferretdb'
    fake.next((call, db) => {
      apply(call, db) // applied, and still answered ok: 0 (docs/server-behaviours.md: `ok: 0` does not prove nothing was applied)
      throw commandError(1, 'InternalError')
    })
    const set = c.updateOne({ _id: 1 }, { $set: { v: 1 } }, { upsert: true })
    const inc = c.updateOne({ _id: 2 }, { $inc: { n: 1 } }, { upsert: true })
    const [s, i] = await Promise.all([fastForward(set), fastForward(inc)])
    expect(s.status).toBe('fulfilled')
    expect(i.status === 'rejected' && (i.reason as Document).outcome).toBe('unknown')
    expect(fake.docs('c').find(d => d._id === 2)?.n).toBe(1) // told unknown: it was applied, once
  })
})

describe('what cannot be sent never joins a batch', () => {
  it('refused at submit, naming the path: NUL bytes in keys and RegExps, unknown operators, non-numeric $inc/$mul', async () => {
    const { fake, c } = harness()
    const bad: Array<[() => Promise<unknown>, RegExp]> = [
      [() => c.insertOne({ ok: 1, nested: { 'a\0b': 1 } }), /key "a\\u0000b" in nested contains a NUL byte/],
      [() => c.updateOne({ _id: 1 }, { $set: { 'x\0': 1 } }), /NUL byte/],
      [() => c.updateOne({ 'f\0': 1 }, { $set: { x: 1 } }), /NUL byte/],
      [() => c.insertOne({ r: new RegExp(`a${NUL}b`) }), /r: regular expression pattern contains a NUL byte/],
      [() => c.updateOne({ _id: 1 }, { $foo: { a: 1 } }), /unknown update operator "\$foo"/],
      [() => c.updateOne({ _id: 1 }, { $inc: { a: 'x' } }), /\$inc needs a number for "a"/],
      [() => c.updateOne({ _id: 1 }, { $mul: { a: null } }), /\$mul needs a number for "a"/],
      [() => c.updateOne({ _id: 1 }, [{ $match: { a: 1 } }]), /update pipeline stage 0 is "\$match"/],
    ]
    for (const [write, message] of bad) {
      const err = await write().then(() => undefined, (e: unknown) => e)
      expect(err, String(message)).toBeInstanceOf(InvalidWriteError)
      expect((err as Error).message).toMatch(message)
    }
    await c.updateOne({ _id: 1 }, { $inc: { a: 1 }, $set: { b: 1 } }, { upsert: true })
    expect(fake.calls).toHaveLength(1)
  })

  it('a document changed after submit so it cannot be serialized: it fails alone (not-sent, naming the key), its batch-mates are sent', async () => {
    const { fake, c } = harness(FAST)
    // the driver serializes at send time and throws for the whole bulkWrite (docs/server-behaviours.md: the driver serializes at send time)
    fake.fallback = (call, db) => {
      for (const body of call.raw) BSON.serialize(body)
      return apply(call, db)
    }
    const docs = [{ _id: 1 }, { _id: 2 }, { _id: 3 }] as Document[]
    const writes = docs.map(d => settle(c.insertOne(d)))
    ;(docs[1] as Document)['bad\0key'] = 1 // same tick: before the batch is sent
    const results = await Promise.all(writes)
    expect(results[0]?.status).toBe('fulfilled')
    expect(results[2]?.status).toBe('fulfilled')
    const err = results[1]?.status === 'rejected' ? results[1].reason as Document : {}
    expect(err).toMatchObject({ code: ErrorCodes.INVALID_WRITE, outcome: 'not-sent' })
    expect(err.message).toMatch(/bad\\u0000key/)
    expect(fake.docs('c').map(d => d._id)).toEqual([1, 3])
  })
})

describe('a serializer failure raised by the caller\'s own code or value at send time (a getter, a toBSON(), a Proxy trap, a Map key)', () => {
  /** As the driver does: serializes every statement when sending, running the caller's getters and toBSON()s. */
  const serializing: Responder = (call, db) => {
    for (const body of call.raw) BSON.serialize(body)
    return apply(call, db)
  }
  /** Makes `o` fail to serialize from the time `arm()` is called: a getter, toBSON or Proxy trap that throws only then. */
  const armed = (install: (o: Document, isArmed: () => boolean) => void) => (o: Document): () => void => {
    let on = false
    install(o, () => on)
    return () => { on = true }
  }
  const spoilers: Array<[string, (o: Document) => () => void, RegExp]> = [
    ['a getter that throws only at send time', armed((o, on) => Object.defineProperty(o, 'g', { enumerable: true, get () { if (on()) throw new Error('getter armed'); return 1 } })), /getter armed/],
    ['a toBSON() that throws only at send time', armed((o, on) => { o.v = { toBSON () { if (on()) throw new Error('toBSON armed'); return { x: 1 } } } }), /toBSON armed/],
    ['a Proxy whose trap throws only at send time', armed((o, on) => { o.p = new Proxy({ a: 1 }, { ownKeys (t) { if (on()) throw new Error('trap armed'); return Reflect.ownKeys(t) } }) }), /trap armed/],
    ['a Map given a number key after submit', o => () => { o.m = new Map([[1, 'x']]) }, /string/],
  ]

  for (const kind of ['insert', 'update'] as const) {
    it.each(spoilers)(`${kind}, %s: it fails alone (not-sent, naming why), its batch-mates are sent`, async (_name, spoil, message) => {
      const { fake, c } = harness(FAST)
      fake.fallback = serializing
      // the inserted documents, or the $set operands of upserts by _id
      const parts: Document[] = [1, 2, 3].map(i => kind === 'insert' ? { _id: i } : { v: i })
      const arm = spoil(parts[1] as Document)
      const writes = parts.map((p, i) => settle<unknown>(kind === 'insert' ? c.insertOne(p) : c.updateOne({ _id: i + 1 }, { $set: p }, { upsert: true })))
      arm() // same tick: before the batch is sent
      const results = await Promise.all(writes)
      expect(results[0]?.status).toBe('fulfilled')
      expect(results[2]?.status).toBe('fulfilled')
      const err = results[1]?.status === 'rejected' ? results[1].reason as Document : {}
      expect(err).toMatchObject({ code: ErrorCodes.INVALID_WRITE, outcome: 'not-sent' })
      expect(err.message).toMatch(message)
      expect(fake.docs('c').map(d => d._id)).toEqual([1, 3])
    })
  }

  it('a getter that throws while the buffer merges two updates of one document (review, issue 42 item 6): nothing of it is merged, nothing hangs — the merge is all or nothing, the write goes alone and fails alone at send time', async () => {
    const { fake, c } = harness({ ...FAST, lingerMs: 20 }) // both gathered into one take
    fake.fallback = serializing
    fake.seed('c', { _id: 1, a: 0 })
    const set: Document = { b: 1 } // and a getter `g`: fields created after `a`, so the two merge
    const arm = (spoilers[0] as [string, (o: Document) => () => void, RegExp])[1](set)
    const writes = Promise.all([settle(c.updateOne({ _id: 1 }, { $inc: { a: 1 } })), settle(c.updateOne({ _id: 1 }, { $set: set }))])
    arm() // same tick: before the batch is picked and the second merged into the first
    let timer: NodeJS.Timeout | undefined
    const results = await Promise.race([writes, new Promise<'hung'>(resolve => { timer = setTimeout(resolve, 5_000, 'hung') })])
    clearTimeout(timer)
    expect(results, 'the writes never settled').not.toBe('hung')
    const [inc, bad] = results as Array<Awaited<ReturnType<typeof settle>>>
    expect(inc?.status).toBe('fulfilled')
    expect(bad?.status === 'rejected' && bad.reason).toMatchObject({ code: ErrorCodes.INVALID_WRITE, outcome: 'not-sent' })
    expect(fake.docs('c')).toEqual([{ _id: 1, a: 1 }]) // `b` was not merged into the $inc's update
  })

  it('the same error with no write unsendable now (a bug of a wrapped Collection, say): the whole batch fails as before, outcome unknown', async () => {
    const { fake, c } = harness(FAST)
    fake.next(() => { throw new TypeError('not the serializer') })
    const results = await Promise.all([1, 2, 3].map(i => settle(c.insertOne({ _id: i }))))
    for (const r of results) expect(r.status === 'rejected' && r.reason).toMatchObject({ code: ErrorCodes.BATCH_FAILED, outcome: 'unknown' })
  })

  it('where the driver may have resent the batch (a replica set): not read as the serializer\'s, its retry may follow an attempt that went out', async () => {
    const { fake, c } = harness(FAST, 'replset')
    fake.fallback = serializing
    const bad: Document = { _id: 2 }
    const arm = (spoilers[0] as [string, (o: Document) => () => void, RegExp])[1](bad)
    const writes = [{ _id: 1 }, bad, { _id: 3 }].map(d => settle(c.insertOne(d)))
    arm()
    const results = await Promise.all(writes)
    expect(results.map(r => r.status === 'rejected' && (r.reason as Document).outcome)).toEqual(['unknown', 'unknown', 'unknown'])
  })

  it('a socket\'s error while a write cannot be serialized now: that write is never told not-sent (its bytes may have gone out)', async () => {
    useFakeClock()
    const { fake, c } = harness(FAST)
    fake.fallback = serializing
    const bad: Document = { _id: 2 }
    const arm = (spoilers[0] as [string, (o: Document) => () => void, RegExp])[1](bad)
    fake.next(() => { arm(); throw Object.assign(new Error('write ECONNRESET'), { code: 'ECONNRESET', errno: -104, syscall: 'write' }) })
    const writes = Promise.all([{ _id: 1 }, bad, { _id: 3 }].map(d => settle(c.insertOne(d))))
    const settled = await fastForward(writes)
    const results = settled.status === 'fulfilled' ? settled.value : []
    expect(results[1]?.status === 'rejected' && results[1].reason).toMatchObject({ code: ErrorCodes.INVALID_WRITE, outcome: 'unknown' })
    expect(results[0]?.status).toBe('fulfilled')
    expect(results[2]?.status).toBe('fulfilled')
  })
})

describe('retry-safe means a resend cannot reach another document', () => {
  it('an updateOne on a non-_id filter is not sent again after an unknown outcome; with uniqueFilter it is', async () => {
    useFakeClock()
    const { fake, c } = harness(FAST)
    fake.next(() => { throw networkError() }, () => { throw networkError() })
    const plain = await fastForward(c.updateOne({ name: 'a' }, { $set: { v: 1 } }))
    expect(plain.status === 'rejected' && (plain.reason as Document).outcome).toBe('unknown')
    expect(fake.calls).toHaveLength(1)
    const unique = await fastForward(c.updateOne({ name: 'b' }, { $set: { v: 1 } }, { uniqueFilter: true }))
    expect(unique.status).toBe('fulfilled')
    expect(fake.calls).toHaveLength(3)
    // an _id with other fields beside it still pins one document
    fake.next(() => { throw networkError() })
    expect((await fastForward(c.updateOne({ _id: 5, name: 'c' }, { $set: { v: 1 } }))).status).toBe('fulfilled')
  })
})

describe('the fence survives a paused server', () => {
  it('a later write to a fenced document waits for maxTimeMS + margin after the server first answers again, not only after the failure', async () => {
    useFakeClock()
    const { fake, c } = harness({ maxTimeMS: 1_000, retry: { maxAttempts: 1 } })
    let wake!: () => void
    fake.pingGate = new Promise<void>(resolve => { wake = resolve }) // paused: pings unanswered
    fake.next(() => { throw networkError() })
    const first = await fastForward(c.updateOne({ _id: 1 }, { $inc: { n: 1 } }))
    expect(first.status === 'rejected' && (first.reason as Document).outcome).toBe('unknown')
    const failedAt = Date.now()
    const later = c.updateOne({ _id: 1 }, { $set: { v: 2 } })
    const t = settle(later)
    // 5 s: far past maxTimeMS + 1 s from the failure, yet the server has not answered since
    for (let i = 0; i < 100; i++) await fastForwardStep(50)
    expect(fake.calls).toHaveLength(1)
    wake()
    const wokeAt = Date.now()
    await fastForward(later)
    await t
    expect(fake.calls).toHaveLength(2)
    expect((fake.calls[1] as BulkCall).startedAt).toBeGreaterThan(0)
    expect(Date.now() - wokeAt).toBeGreaterThanOrEqual(2_000 - 50) // maxTimeMS + 1 s after the answer
    expect(wokeAt - failedAt).toBeGreaterThanOrEqual(5_000)
  })
})

async function fastForwardStep (ms: number): Promise<void> {
  await advance(ms)
}

describe('a retry waiting for the proof still meets its deadline', () => {
  it('the server stays silent: the write waiting to be retried is told WRITE_BUFFER_TIMEOUT (unknown) at its deadline; its document stays fenced', async () => {
    useFakeClock()
    const { fake, c } = harness({ maxTimeMS: 500, writeTimeoutMs: 3_000, retry: { maxAttempts: 3, baseDelayMs: 1 } })
    let wake!: () => void
    fake.pingGate = new Promise<void>(resolve => { wake = resolve }) // no answer to any ping
    fake.next(() => { throw networkError() })
    const first = c.updateOne({ _id: 1 }, { $set: { v: 1 } }) // retry-safe: waits to be sent again
    const t0 = Date.now()
    const settled = await fastForward(first)
    expect(settled.status === 'rejected' && (settled.reason as Document)).toMatchObject({ code: ErrorCodes.TIMEOUT, outcome: 'unknown' })
    expect(Date.now() - t0).toBeLessThan(3_000 + 500)
    const later = c.updateOne({ _id: 1 }, { $set: { v: 2 } }, { timeoutMs: 60_000 })
    for (let i = 0; i < 40; i++) await fastForwardStep(50)
    expect(fake.calls).toHaveLength(1) // still fenced: the server has not answered since
    wake()
    expect((await fastForward(later)).status).toBe('fulfilled')
  })
})

describe('a server that takes fewer writes per command than its hello says (DocumentDB: 25,000, hello 100,000)', () => {
  /** Refuses a command of more than `bound` statements as MongoDB and DocumentDB do (InvalidLength, before reading any), else applies it. */
  const bounded = (bound: number): Responder => (call, db) => {
    if (call.raw.length > bound) throw commandError(16, `Write batch sizes must be between 1 and ${bound}. Got ${call.raw.length} operations.`)
    return apply(call, db)
  }

  it('learns the bound from the refusal for the rest of its life (stats shows it): the writes go again in batches it takes, a duplicate key among them rejected, not unknown', async () => {
    const { fake, wb, c } = harness({ ...FAST, maxBatchSize: 999 })
    fake.server = 'ferretdb' // not MongoDB: a refusal proves nothing, except this one, raised before any statement is read
    fake.fallback = bounded(25)
    await c.insertOne({ _id: 'taken' })
    const writes = Array.from({ length: 99 }, (_, i) => settle(c.insertOne(i === 50 ? { _id: 'taken' } : { i })))
    const results = outcomes(await Promise.all(writes))
    expect(results.filter(r => r === 'ok')).toHaveLength(98)
    expect(results[50]).toBe('11000/rejected')
    expect(wb.stats().maxWriteBatchSize).toBe(25)
    expect(wb.stats().isolatedBatches).toBe(0)
    // the insert of 'taken', one refused command, then batches of at most 24 (one fewer than the bound)
    expect(fake.calls.length).toBeLessThanOrEqual(1 + 1 + Math.ceil(99 / 24))
    const later = settle(c.insertOne({ late: true }))
    expect(outcomes([await later])).toEqual(['ok'])
    expect(fake.calls.slice(2).every(call => call.raw.length <= 24)).toBe(true)
  })

  it('a refusal for too many writes that is not about this batch (it holds no more than the bound named) is read as any other refusal', async () => {
    const { fake, wb, c } = harness(FAST)
    fake.fallback = () => { throw commandError(16, 'Write batch sizes must be between 1 and 100. Got 0 operations.') }
    const results = outcomes(await Promise.all([settle(c.insertOne({ a: 1 }))]))
    expect(results).toEqual(['16/rejected'])
    expect(wb.stats().maxWriteBatchSize).not.toBe(100)
  })
})

/** The writes' settled results, the fake clock moved on until they are all in. */
async function forwarded<T> (writes: Array<Promise<T>>): Promise<T[]> {
  const r = await fastForward(Promise.all(writes))
  if (r.status !== 'fulfilled') throw r.reason
  return r.value
}

describe('a poison the server closes the connection on (FerretDB 1.24 on NaN: docs/server-behaviours.md: a poison can close the connection)', () => {
  /** Closes the connection on a command carrying a document with NaN, as FerretDB 1.24 does; applies the others. */
  const dropsNaN: Responder = (call, db) => {
    const nan = (d: unknown): boolean => Number.isNaN((d as Document | undefined)?.a)
    if (call.bodies.some(b => nan(b.document) || nan((b.update as Document | undefined)?.$set))) throw networkError()
    return apply(call, db)
  }

  for (const n of [1, 2, 1_000]) {
    it(`NaN among ${n}: closed twice while the server answers a ping between them, the batch is isolated — its mates stored, the culprit alone unknown`, async () => {
      useFakeClock()
      const { fake, c } = harness({ ...FAST, maxBatchSize: 999, retry: { baseDelayMs: 1, maxAttempts: 4 } })
      fake.server = 'ferretdb'
      fake.fallback = dropsNaN
      const writes = Array.from({ length: n }, (_, i) => settle(c.insertOne(i === n - 1 ? { i, a: NaN } : { i })))
      const results = outcomes(await forwarded(writes))
      expect(results.slice(0, n - 1).every(r => r === 'ok')).toBe(true)
      expect(results[n - 1]).toBe(`${ErrorCodes.BATCH_FAILED}/unknown`)
      expect(fake.docs('c')).toHaveLength(n - 1)
      // the first attempt and one resend whole, then halves down to the culprit (2 per level; batches of up to 999)
      const levels = Math.ceil(Math.log2(Math.max(2, Math.min(n, 999))))
      expect(fake.calls.length).toBeLessThanOrEqual(Math.ceil(n / 999) * 2 + 2 * levels + 2)
    })
  }

  it('a later write of the culprit\'s document, parked while the batch is isolated, waits out the fence from the last close (review: it went out before the fence was in place)', async () => {
    useFakeClock()
    const { fake, c } = harness({ ...FAST, maxTimeMS: 1_000, lingerMs: 5, retry: { baseDelayMs: 1, maxAttempts: 4 } })
    fake.server = 'ferretdb'
    const sentAt: number[] = []
    let lastClose = 0
    fake.fallback = (call, db) => {
      if (call.bodies.some(b => (b.update as Document | undefined)?.$set?.v === 2)) sentAt.push(Date.now())
      try {
        return dropsNaN(call, db)
      } catch (err) {
        lastClose = Date.now()
        throw err
      }
    }
    const culprit = settle(c.updateOne({ _id: 'p' }, { $set: { a: NaN } }, { upsert: true }))
    const mate = settle(c.updateOne({ _id: 'q' }, { $set: { b: 1 } }, { upsert: true }))
    // past the first close and its fence (2 s), into the second close's wait (2 s more)
    for (let i = 0; i < 60; i++) await fastForwardStep(50)
    const later = settle(c.updateOne({ _id: 'p' }, { $set: { v: 2 } }, { upsert: true }))
    const results = outcomes(await forwarded([culprit, mate, later]))
    expect(results.slice(0, 2)).toEqual([`${ErrorCodes.BATCH_FAILED}/unknown`, 'ok'])
    expect(results[2]).toBe('ok')
    expect(sentAt.length).toBeGreaterThan(0)
    expect((sentAt[0] as number) - lastClose).toBeGreaterThanOrEqual(2_000 - 50) // maxTimeMS + 1 s after the last close
  })

  it('the server goes silent after the second close: the writes waiting out the fence in flight are told their deadline passed (review: they waited as long as the silence)', async () => {
    useFakeClock()
    const { fake, c } = harness({ ...FAST, maxTimeMS: 1_000, writeTimeoutMs: 8_000, retry: { baseDelayMs: 1, maxAttempts: 4 } })
    fake.server = 'ferretdb'
    let closes = 0
    fake.fallback = (call, db) => {
      try {
        return dropsNaN(call, db)
      } catch (err) {
        if (++closes === 2) fake.pingGate = new Promise<void>(() => {}) // silent from now on
        throw err
      }
    }
    const t0 = Date.now()
    const writes = [settle(c.insertOne({ a: NaN })), settle(c.insertOne({ b: 1 }))]
    const settled = await fastForward(Promise.all(writes))
    expect(settled.status).toBe('fulfilled')
    const results = outcomes(settled.status === 'fulfilled' ? settled.value : [])
    expect(results).toEqual([`${ErrorCodes.TIMEOUT}/unknown`, `${ErrorCodes.TIMEOUT}/unknown`])
    expect(closes).toBe(2)
    expect(Date.now() - t0).toBeLessThan(30_000) // settled by their deadline, not by the end of the 10 fake minutes
  })

  it('a $inc among them is told unknown at once after the second close (it may have been applied), never resent; its retry-safe mates are stored', async () => {
    useFakeClock()
    const { fake, c } = harness(FAST)
    fake.server = 'ferretdb'
    fake.fallback = dropsNaN
    await fastForward(c.insertOne({ _id: 'n', n: 0 }))
    const writes = [settle(c.updateOne({ _id: 'n' }, { $inc: { n: 1 } })), settle(c.updateOne({ _id: 'p' }, { $set: { a: NaN } }, { upsert: true })), settle(c.updateOne({ _id: 'q' }, { $set: { b: 1 } }, { upsert: true }))]
    const results = outcomes(await forwarded(writes))
    expect(results[0]).toMatch(/unknown$/)
    expect(results[1]).toBe(`${ErrorCodes.BATCH_FAILED}/unknown`)
    expect(results[2]).toBe('ok')
    expect(fake.docs('c').map(d => d._id).sort()).toEqual(['n', 'q'])
    expect(fake.calls.slice(1).filter(call => call.ids.includes('n'))).toHaveLength(1) // (after the setup insert) the $inc went once: the first attempt, never resent
  })
})
