import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { BSON, Decimal128, Long, ObjectId, type Db, type MongoClient } from 'mongodb'
import { WriteBuffer, type BufferedCollection } from '../src/index.js'
import { openDb } from './helpers.js'
import { capabilities } from './support/capabilities.js'
import { prng } from './support/prng.js'

/**
 * Differential test of the read cache against the server: a seeded random sequence of writes
 * through the buffer (not awaited: reads must see them anyway) and reads through the cache;
 * after each read, everything is flushed and the same read is made with the raw driver. The
 * two answers must be identical, BSON types and key order included (both decoded with
 * promoteValues/promoteLongs off, compared as canonical Extended JSON).
 * FWB_CACHE_DIFF_STEPS sets the length (npm test: 5,000, ~15 s; `npm run test:cache-diff`: 200,000;
 * the GitHub workflow hunts 50,000 on each MongoDB version).
 */
const STEPS = Number(process.env.FWB_CACHE_DIFF_STEPS ?? 5_000)
const SEED = Number(process.env.FWB_CACHE_DIFF_SEED ?? 20261125)
const IDS = 12

let client: MongoClient
let db: Db
beforeAll(async () => { ({ client, db } = await openDb('cache_diff')) })
afterAll(async () => { await client.close() })

/**
 * One seeded run. `freshEvery`: every that many steps the buffer is closed and a new one (an
 * empty cache) takes over, its first steps (up to 60) writes only, so each buffer's first read
 * finds writes queued before any read asked about the collection (listed, not indexed, until
 * then: cache/noted-writes.ts).
 */
async function differential (steps: number, seed: number, freshEvery?: number): Promise<void> {
  // Decimal128 values only where the server stores them exactly (FerretDB 1.x closes the connection on any)
  const decimals = capabilities().decimal128
  const random = prng(seed)
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)] as T
  const refs = Array.from({ length: 3 }, (_, i) => new ObjectId(`6650000000000000000000a${i}`))
  // lone surrogates: the driver sends them as U+FFFD, so 'd\uD800@x', 'd\uDC00@x' and 'd\uFFFD@x' are one value
  const emails = ['a@x', 'b@x', 'c@x', 'A@x', 'd\uD800@x', 'd\uDC00@x', 'd\uFFFD@x']
  const values = (): unknown => pick<() => unknown>([
    () => Math.floor(random() * 5), // int32
    () => Math.floor(random() * 5) + 0.5, // double
    () => Long.fromNumber(Math.floor(random() * 5)),
    () => Long.fromString('9007199254740993'),
    () => pick(['s1', 's2', '', '\uD800', '\uFFFD', 's\uDC00']),
    () => ({ toBSON: () => pick(['s1', 's2']) }), // sent as what toBSON() returns
    () => pick(refs),
    () => pick(refs).toHexString(), // a string that looks like an ObjectId
    () => new Date(1_700_000_000_000 + Math.floor(random() * 3) * 1000),
    () => decimals ? Decimal128.fromString(pick(['1', '1.0', '2'])) : Math.floor(random() * 5),
    () => ({ x: 1, y: 2 }),
    () => ({ y: 2, x: 1 }), // same fields, other order: another value for the server
    () => [pick(['t1', 't2']), pick(['t2', 't3'])],
    () => null,
    () => random() < 0.5,
  ])()
  const fields = ['email', 'n', 'tags', 'ref', 'nested', 'when', 'v']
  const randomDoc = (id: number): Record<string, unknown> => {
    const doc: Record<string, unknown> = { _id: id }
    for (const f of fields) if (random() < 0.6) doc[f] = f === 'email' ? pick(emails) : values()
    return doc
  }
  const coll = freshEvery === undefined ? 'people' : 'people_fresh'
  await db.collection(coll).insertMany(Array.from({ length: IDS }, (_, i) => randomDoc(i)) as never[])
  // the same decoding for both sides: every BSON type visible
  const exactDb = client.db(db.databaseName, { promoteValues: false, promoteLongs: false })
  const buffer = (): WriteBuffer => new WriteBuffer(exactDb, { cache: { ttlMs: 600_000, negativeTtlMs: 600_000, maxEntries: 50, maxBytes: 1024 * 1024 } })
  let wb = buffer()
  let people: BufferedCollection = wb.collection(coll)
  let writesOnly = 0
  const raw = exactDb.collection(coll)
  const filters = (): Record<string, unknown> => pick<() => Record<string, unknown>>([
    () => ({ _id: Math.floor(random() * (IDS + 2)) }),
    () => ({ _id: Long.fromNumber(Math.floor(random() * IDS)) }), // numbers match across types
    () => ({ email: pick(emails) }),
    () => ({ tags: pick(['t1', 't2', 't3']) }),
    () => ({ n: pick([0, 1, 2, 2.5, Long.fromNumber(3)]) }),
    () => ({ ref: pick(refs) }),
    () => ({ ref: pick(refs).toHexString() }),
    () => ({ email: pick(emails), v: pick([true, false, 1]) }),
    () => ({ n: { toBSON: () => 1 } }), // a value sent as another: read through
    () => ({ v: pick(['\uD800', '\uFFFD']) }),
    () => ({ nested: { x: 1, y: 2 } }), // not decidable by the cache: read through
    () => ({ n: { $gte: 2 } }), // idem
  ])()
  const writes: Array<Promise<unknown>> = []
  let reads = 0
  let hits = 0
  const differences: string[] = []
  for (let step = 0; step < steps && differences.length < 5; step++) {
    if (freshEvery !== undefined && step % freshEvery === 0) {
      await wb.close()
      wb = buffer()
      people = wb.collection(coll)
      writesOnly = Math.floor(random() * 61)
    }
    const id = Math.floor(random() * IDS)
    const r = writesOnly > 0 ? (writesOnly--, 0) : random()
    if (r < 0.35) {
      const kind = Math.floor(random() * 10)
      const f = pick(fields)
      const w = kind === 0
        ? people.replaceOne({ _id: id }, randomDoc(id))
        : kind === 1
          ? people.updateOne({ _id: id }, { $unset: { [f]: '' } })
          : kind === 2
            ? people.updateOne({ _id: id }, { $inc: { n: pick([1, 2.5, Long.fromNumber(2)]) } })
            : kind === 3
              ? people.updateOne({ email: pick(emails) }, { $set: { v: values() } }) // not unique: the server picks one
              : kind === 4
                ? people.deleteOne({ _id: id })
                : kind === 5
                  ? people.insertOne(randomDoc(id)) // duplicate key unless deleted
                  : kind === 6
                    ? people.updateMany({ tags: pick(['t1', 't2']) }, { $set: { [f]: values() } })
                    : kind === 7
                      ? people.updateOne({ _id: id }, { $rename: { [f]: pick(fields.filter(x => x !== f)) } })
                      : kind === 8
                        ? people.updateOne({ _id: id }, { $set: { 'nested.x': values() } })
                        : people.updateOne({ _id: id }, { $set: { [f]: f === 'email' ? pick(emails) : values() } }, { upsert: random() < 0.2 })
      writes.push(w.catch(() => {}))
      continue
    }
    const filter = filters()
    const projection = random() < 0.1 ? { email: 1, n: 1 } : undefined
    const before = wb.cache?.stats().hits ?? 0
    const cached = await people.findOne(filter, projection === undefined ? undefined : { projection })
    hits += (wb.cache?.stats().hits ?? 0) - before
    await wb.flush()
    const findOptions = projection === undefined ? undefined : { projection }
    const truth = await raw.findOne(filter, findOptions)
    reads++
    const a = BSON.EJSON.stringify(cached, { relaxed: false })
    // Without a sort, which of several matching documents findOne returns is the server's
    // choice (its order can change as documents are updated: PostgreSQL under the stand-in
    // moves a row on update; WiredTiger does not). So the exact check is: the server finds
    // nothing exactly when the cache answers null, and the cached document is, type for type
    // and key for key, one the server returns for this filter right now.
    const same = cached === null
      ? truth === null
      : truth !== null && a === BSON.EJSON.stringify(await raw.findOne({ $and: [filter, { _id: (cached as { _id: unknown })._id }] }, findOptions), { relaxed: false })
    if (!same) differences.push(`step ${step} findOne(${BSON.EJSON.stringify(filter)}): cache ${a} vs server ${BSON.EJSON.stringify(truth, { relaxed: false })}`)
  }
  await Promise.all(writes)
  await wb.close()
  console.log(`cache differential: ${steps} steps${freshEvery === undefined ? '' : ` (a fresh buffer every ${freshEvery})`}, ${reads} reads compared, ${hits} served from the cache, stats ${JSON.stringify(wb.cache?.stats())}`)
  expect(differences).toEqual([])
  expect(hits).toBeGreaterThan(reads / 10) // the cache really served answers, not only read-throughs
}

describe('read cache vs the server', () => {
  it(`${STEPS.toLocaleString('en-US')} random steps: every cached answer equals the server's, types and key order included`, async () => {
    await differential(STEPS, SEED)
  }, 600_000)

  it(`${Math.ceil(STEPS / 2).toLocaleString('en-US')} random steps over a fresh buffer every 100, its first read after up to 60 writes: the same`, async () => {
    await differential(Math.ceil(STEPS / 2), SEED + 1, 100)
  }, 600_000)
})
