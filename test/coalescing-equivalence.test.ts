/**
 * Coalescing and batching change nothing a caller could see: the same writes, submitted
 * together through the buffer, leave the same documents as sent one by one, in order, by the
 * driver — and each caller is told its own write's fate (fulfilled or refused, with the
 * server's code). Each case here was found by a reviewer where they differed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { BSON, type Db, type Document, type MongoClient } from 'mongodb'
import { WriteBuffer, type WriteBufferOptions } from '../src/index.js'
import { openDb } from './helpers.js'
import { lacks } from './support/capabilities.js'

let client: MongoClient
let db: Db
let n = 0

beforeAll(async () => { ({ client, db } = await openDb('coalescing_equivalence', { monitorCommands: false })) })
afterAll(async () => { await client.close() })

type Write = [method: 'updateOne' | 'insertOne' | 'deleteOne', ...args: unknown[]]

const ejson = (v: unknown): string => BSON.EJSON.stringify(v as Document, { relaxed: false })
const copy = <T> (v: T): T => BSON.deserialize(BSON.serialize({ v }), { promoteValues: false }).v as T
const BUFFER_ONLY = new Set(['lingerMs', 'timeoutMs', 'uniqueFilter', 'detached', 'signal'])
function driverOptions (o: unknown): unknown {
  if (o === undefined || o === null || typeof o !== 'object') return o
  return Object.fromEntries(Object.entries(o).filter(([k]) => !BUFFER_ONLY.has(k)))
}

interface Fate { ok: boolean, code?: unknown, upserted?: boolean }

/** Runs `writes` one by one with the driver and together through a WriteBuffer; returns both sides. */
async function both (seed: Document[], writes: () => Write[], options: WriteBufferOptions = {}, sortBy = '_id'): Promise<{
  raw: string[], buffered: string[], rawFates: Fate[], bufferedFates: Fate[]
}> {
  const raw = db.collection(`raw${++n}`)
  const buf = db.collection(`buf${n}`)
  if (seed.length > 0) {
    await raw.insertMany(copy(seed))
    await buf.insertMany(copy(seed))
  }
  const rawFates: Fate[] = []
  for (const [method, ...args] of writes()) {
    const last = args.length - 1
    const a = args.map((x, i) => (i === last && method !== 'insertOne' && i > 0 && (method === 'deleteOne' || i === 2)) ? driverOptions(x) : x)
    try {
      const r = await (raw[method] as (...x: unknown[]) => Promise<{ upsertedId?: unknown }>)(...a)
      rawFates.push({ ok: true, upserted: r.upsertedId !== undefined && r.upsertedId !== null })
    } catch (err) {
      rawFates.push({ ok: false, code: (err as { code?: unknown }).code })
    }
  }
  const wb = new WriteBuffer(db, options)
  const c = wb.collection(buf.collectionName)
  const settled = await Promise.allSettled(writes().map(([method, ...args]) => (c[method] as (...x: unknown[]) => Promise<{ upsertedId?: unknown }>)(...args)))
  await wb.close()
  const bufferedFates = settled.map(s => s.status === 'fulfilled'
    ? { ok: true, upserted: s.value.upsertedId !== undefined && s.value.upsertedId !== null }
    : { ok: false, code: (s.reason as { code?: unknown }).code })
  const docs = async (col: typeof raw): Promise<string[]> => (await col.find({}, { promoteValues: false, projection: { _id: 0 } }).sort({ [sortBy]: 1 }).toArray()).map(ejson)
  return { raw: await docs(raw), buffered: await docs(buf), rawFates, bufferedFates }
}

async function expectSame (seed: Document[], writes: () => Write[], options?: WriteBufferOptions, sortBy?: string): Promise<void> {
  const r = await both(seed, writes, options, sortBy)
  expect(r.buffered).toEqual(r.raw)
  expect(r.bufferedFates).toEqual(r.rawFates)
}

describe('coalescing equals one by one', () => {
  it('a merged update split after a refusal: its parts are not overtaken by a later write parked behind it', async () => {
    // W0 goes out; W1 (refused: $inc of a string) and W2 merge; W3 ($mul) cannot, and parks
    // behind them. The merge is refused and taken apart: W2 must still run before W3
    await expectSame([{ _id: 1, s: 'str', v: 2 }], () => [
      ['updateOne', { _id: 1 }, { $set: { x: 1 } }],
      ['updateOne', { _id: 1 }, { $inc: { s: 1 } }],
      ['updateOne', { _id: 1 }, { $set: { v: 5 } }],
      ['updateOne', { _id: 1 }, { $mul: { v: 10 } }],
    ])
    await expectSame([{ _id: 1, s: 'str', v: 2 }], () => [
      ['updateOne', { _id: 1 }, { $set: { x: 1 } }],
      ['updateOne', { _id: 1 }, { $set: { r: 5 } }],
      ['updateOne', { _id: 1 }, { $inc: { s: 1 } }],
      ['updateOne', { _id: 1 }, { $set: { v: 7 } }],
      ['updateOne', { _id: 1 }, { $mul: { v: 10 } }],
    ])
  })

  it('an update through an array position ($, $[], .0) changes what its filter selects: never merged', async () => {
    const seats = [{ _id: 1, seats: [{ n: 1, free: true }, { n: 2, free: true }] }]
    await expectSame(seats, () => [
      ['updateOne', { _id: 1, 'seats.free': true }, { $set: { 'seats.$.free': false, 'seats.$.by': 'u1' } }],
      ['updateOne', { _id: 1, 'seats.free': true }, { $set: { 'seats.$.free': false, 'seats.$.by': 'u2' } }],
    ], { lingerMs: 20 } as WriteBufferOptions)
    const arr = [{ _id: 1, arr: [{ v: 3 }, { v: 5 }] }]
    for (const path of ['arr.$.v', 'arr.0.v']) {
      await expectSame(arr, () => [
        ['updateOne', { 'arr.v': 3 }, { $inc: { [path]: 1 } }],
        ['updateOne', { 'arr.v': 3 }, { $inc: { [path]: 1 } }],
      ])
    }
    await expectSame(arr, () => [
      ['updateOne', { 'arr.v': 3 }, { $set: { 'arr.$[].v': 0 } }],
      ['updateOne', { 'arr.v': 3 }, { $set: { x: 1 } }],
    ])
  })

  it('two Maps in filters are two targets, as the documents they select', async () => {
    await expectSame([{ _id: 1, a: { x: 1 } }, { _id: 2, a: { x: 2 } }], () => [
      ['updateOne', { a: new Map([['x', 1]]) }, { $set: { p: 1 } }],
      ['updateOne', { a: new Map([['x', 2]]) }, { $set: { q: 1 } }],
    ], undefined, 'a.x')
  })

  it.skipIf(lacks('decimal128'))('Decimal128 0.1 and the double 0.1 are two targets, as the server tells them apart [needs decimal128]', async () => {
    const d = BSON.Decimal128.fromString('0.1')
    await expectSame([{ _id: 1, k: 0.1 }, { _id: 2, k: d }], () => [
      ['updateOne', { k: d }, { $set: { a: 1 } }],
      ['updateOne', { k: 0.1 }, { $set: { b: 1 } }],
    ], undefined, 'k')
    await expectSame([{ _id: 0.1, v: 0 }, { _id: d, v: 0 }], () => [
      ['updateOne', { _id: 0.1 }, { $inc: { v: 1 } }],
      ['updateOne', { _id: d }, { $inc: { v: 10 } }],
    ], undefined, 'v')
  })

  it('upserts whose filter the inserted document does not match insert one document each', async () => {
    for (const filter of [{ a: { $gt: 5 } }, { k: { $in: [1, 2] } }]) {
      await expectSame([], () => [
        ['updateOne', filter, { $set: { b: 1 } }, { upsert: true }],
        ['updateOne', filter, { $set: { c: 2 } }, { upsert: true }],
        ['updateOne', filter, { $set: { d: 3 }, $setOnInsert: { s: 1 } }, { upsert: true }],
      ], undefined, 'b')
    }
  })

  it('summed $inc keeps the number type one by one gives (-0, int32 overflow and back)', async () => {
    await expectSame([{ _id: 1, n: 5 }], () => [
      ['updateOne', { _id: 1 }, { $inc: { n: -0 } }],
      ['updateOne', { _id: 1 }, { $inc: { n: 1 } }],
    ])
    await expectSame([{ _id: 1, n: 2147483647 }], () => [
      ['updateOne', { _id: 1 }, { $inc: { n: 1 } }],
      ['updateOne', { _id: 1 }, { $inc: { n: -1 } }],
    ])
  })

  it('writes joining a lingering one stop at the batch budget: four $addToSet of 5 MiB each are all applied', async () => {
    const big = 'x'.repeat(5 * 1024 * 1024)
    await expectSame([{ _id: 1, t: [] }], () => [
      ['updateOne', { _id: 1 }, { $addToSet: { t: big } }, { lingerMs: 50 }],
      ['updateOne', { _id: 1 }, { $addToSet: { t: big } }],
      ['updateOne', { _id: 1 }, { $addToSet: { t: big } }],
      ['updateOne', { _id: 1 }, { $addToSet: { t: big } }],
    ])
  })

  it('a lingering write and what it carries count whole against the batch budget when taken: writes kept behind it still fit', async () => {
    const big = 'x'.repeat(7 * 1024 * 1024)
    await expectSame([{ _id: 1, t: [] }], () => [
      ['updateOne', { _id: 1 }, { $addToSet: { t: 'small' } }, { lingerMs: 50 }],
      ['updateOne', { _id: 1 }, { $addToSet: { t: big } }],
      ['updateOne', { _id: 1 }, { $addToSet: { t: big } }],
      ['updateOne', { _id: 1 }, { $addToSet: { t: big } }],
    ], { maxBatchBytes: 15 * 1024 * 1024 })
  })
})
