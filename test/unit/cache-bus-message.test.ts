import { describe, expect, it } from 'vitest'
import { Binary, BSON, Decimal128, Double, Int32, Long, ObjectId, UUID, type Document } from 'mongodb'
import { decode, encode, MAX_MESSAGE_BYTES, remoteFootprint, summarize, type RemoteWrite } from '../../src/cache/bus-message.js'
import { affects, answerOf } from '../../src/cache/footprint.js'
import { EntryStore } from '../../src/cache/entry-store.js'
import { valueHash } from '../../src/cache/value-keys.js'
import { WriteEffects } from '../../src/cache/write-effects.js'
import { InvalidOptionError } from '../../src/index.js'
import { resolveOptions } from '../../src/options.js'
import { buildDelete, buildInsert, buildReplace, buildUpdate } from '../../src/write/build-op.js'
import { targetOfId } from '../../src/write/target.js'
import type { WriteOp } from '../../src/write/write-op.js'
import { tryCoalesce } from '../../src/write/coalesce.js'

/** The cache bus's messages and what they drop: no Redis here (test/cache-bus.test.ts has the real one). */

const none = (): undefined => undefined
const remoteAffects = (write: RemoteWrite, doc: Document | null, filter: Document, projected: boolean): boolean => affects(remoteFootprint(write), answerOf(filter, doc, projected))
const roundTrip = (write: RemoteWrite): RemoteWrite => decode(encode('me', 'users', write)).write

describe('cache bus messages', () => {
  it('_ids survive the trip with their BSON types: ObjectId, Long, UUID, Date, Binary, Decimal128, numbers, strings, documents', () => {
    const ids = [
      new ObjectId(), Long.fromString('9007199254740993'), new UUID(), new Date(1_700_000_000_123), new Binary(Buffer.from([1, 2, 3]), 0x80),
      Decimal128.fromString('1.10'), 5, new Int32(6), new Double(7.5), -0.5, 'ann', { a: 1, b: 'x' },
    ]
    const write = summarize(ids.map(id => buildInsert({ _id: id }, undefined)), none)
    const back = roundTrip(write)
    expect(back.ids.map(targetOfId)).toEqual(ids.map(targetOfId))
    expect(back.ids[1]).toBeInstanceOf(Long) // not a lossy double
    expect(back.hashes.sort()).toEqual(write.hashes.sort())
  })

  it('an _id that is not an exact scalar (Decimal128 2 is the _id 2 on the server) touches any cached answer on the receiving side', () => {
    const write = roundTrip(summarize([buildInsert({ _id: Decimal128.fromString('2'), name: 'two' }, undefined)], none))
    expect(remoteAffects(write, null, { _id: 2 }, false)).toBe(true) // a cached "no document" for _id 2
    expect(remoteAffects(write, { _id: 1, email: 'e' }, { email: 'e' }, false)).toBe(true)
    const exact = roundTrip(summarize([buildInsert({ _id: 3, name: 'three' }, undefined)], none))
    expect(remoteAffects(exact, null, { _id: 2 }, false)).toBe(false) // an exact one is judged by its key
  })

  it('carries the instance id and the collection; small: 100 updates by _id is under 2 KiB', () => {
    const ops = Array.from({ length: 100 }, () => buildUpdate(false, { _id: new ObjectId() }, { $set: { lastLoginAt: new Date() }, $inc: { logins: 1 } }, undefined))
    const bytes = encode('instance-1', 'users', summarize(ops, none))
    expect(bytes.byteLength).toBeLessThan(2048)
    expect(decode(bytes)).toMatchObject({ source: 'instance-1', name: 'users' })
    const doc = BSON.deserialize(bytes)
    expect(Object.keys(doc).sort()).toEqual(['c', 'f', 'h', 'i', 's', 'v'])
  })

  it('never carries document values: only hashes of the values a write sets', () => {
    const secret = 'scrypt$very-secret-hash'
    const bytes = encode('me', 'users', summarize([
      buildInsert({ _id: 1, passwordHash: secret }, undefined),
      buildUpdate(false, { _id: 2 }, { $set: { passwordHash: secret } }, undefined),
      buildReplace({ _id: 3 }, { passwordHash: secret }, undefined),
    ], none))
    expect(Buffer.from(bytes).includes(Buffer.from('very-secret'))).toBe(false)
  })

  it('what each write says', () => {
    const w = (op: Parameters<typeof summarize>[0][number], upserted?: unknown): RemoteWrite => summarize([op], () => upserted)
    expect(w(buildInsert({ _id: 1, email: 'a@x', tags: ['t', 'u'], profile: { x: 1 } }, undefined))).toEqual({
      ids: [1],
      filters: [],
      hashes: [valueHash('_id', 'n1'), valueHash('email', 'sa@x'), valueHash('tags', 'st'), valueHash('tags', 'su')],
      fields: [],
      anyField: false,
      all: false,
    })
    expect(w(buildUpdate(false, { email: 'a@x' }, { $inc: { n: 1 }, $set: { 'a.b': 1 }, $unset: { gone: '' }, $rename: { old: 'new' } }, undefined)))
      .toMatchObject({ ids: [], filters: [{ email: 'a@x' }], hashes: [], fields: ['n', 'a', 'old', 'new'], all: false })
    expect(w(buildUpdate(true, { n: { $gt: 1 } }, { $set: { v: 1 } }, undefined))).toMatchObject({ all: true })
    expect(w(buildUpdate(false, { _id: 1 }, [{ $set: { v: 1 } }], undefined))).toMatchObject({ ids: [1], anyField: true })
    const oid = new ObjectId()
    expect(w(buildUpdate(false, { email: 'b@x' }, { $set: { v: 1 } }, { upsert: true }), oid))
      .toMatchObject({ ids: [oid], filters: [{ email: 'b@x' }], hashes: [valueHash('email', 'sb@x'), valueHash('v', 'n1')] })
    expect(w(buildDelete(false, { _id: 'x' }, undefined))).toMatchObject({ ids: ['x'], hashes: [], fields: [] })
    // numbers of any BSON type hash alike, as the server compares them
    expect(w(buildUpdate(false, { _id: 1 }, { $set: { n: Long.fromNumber(5) } }, undefined)).hashes)
      .toEqual(w(buildUpdate(false, { _id: 1 }, { $set: { n: 5 } }, undefined)).hashes)
  })

  it('a message past MAX_MESSAGE_BYTES says "drop the collection" instead', () => {
    const ops = Array.from({ length: 5000 }, (_, i) => buildInsert({ _id: new ObjectId(), email: `user${i}@example.com`, name: `n${i}` }, undefined))
    const bytes = encode('me', 'users', summarize(ops, none))
    expect(bytes.byteLength).toBeLessThan(MAX_MESSAGE_BYTES)
    expect(decode(bytes).write.all).toBe(true)
    // past what one BSON document can hold (the serializer throws): the same, not a lost message
    const huge: RemoteWrite = { ids: Array.from({ length: 20 }, (_, i) => `${i}`.padEnd(1 << 20, 'x')), filters: [], hashes: [], fields: [], anyField: false, all: false }
    expect(decode(encode('me', 'users', huge)).write.all).toBe(true)
  })

  it('malformed messages throw; another version that names its collection drops the collection', () => {
    for (const bad of [Buffer.from('nope'), BSON.serialize({ v: 1, c: 'x' }), BSON.serialize({ v: 1, s: 'a', c: 'x', i: 5 }),
      BSON.serialize({ v: 1, s: 'a', c: 'x', h: new Binary(Buffer.from([1, 2, 3])) }), BSON.serialize({ v: 1, s: 'a', c: 'x', f: [1] })]) {
      expect(() => decode(bad)).toThrow()
    }
    // forged BSON types (a plain object with _bsontype) among the ids or in a filter: dropped here, never thrown in a reader
    // (the serializer refuses such objects, so the bytes are forged: a field renamed in place)
    const forged = (doc: Document): Uint8Array => {
      const bytes = Buffer.from(BSON.serialize(doc))
      const at = bytes.indexOf('Xbsontype')
      bytes.write('_', at)
      return bytes
    }
    for (const bad of [forged({ v: 1, s: 'a', c: 'x', i: [{ Xbsontype: 'Foo' }] }), forged({ v: 1, s: 'a', c: 'x', q: [{ email: { Xbsontype: 'Binary' } }] })]) {
      expect(BSON.deserialize(bad)).toBeDefined() // well-formed BSON
      expect(() => decode(bad)).toThrow()
    }
    expect(decode(BSON.serialize({ v: 2, s: 'a', c: 'x', whatever: 1 })).write.all).toBe(true)
    expect(decode(BSON.serialize({ v: 1, s: 'a', c: 'x', q: [{ n: { $gt: 1 } }] })).write.all).toBe(true)
  })
})

describe('remote invalidation (WriteEffects#applyRemote) and the fence (remoteAffects) agree', () => {
  const filters = [{ _id: 1 }, { _id: 2 }, { email: 'a@x' }, { email: 'b@x' }, { team: 'red' }, { team: 'red', active: true }, { n: 3 }]
  const docs: Record<string, Record<string, unknown> | null> = {
    '{"_id":1}': { _id: 1, email: 'a@x', team: 'red', active: true, n: 1 },
    '{"_id":2}': null,
    '{"email":"a@x"}': { _id: 1, email: 'a@x', team: 'red', active: true, n: 1 },
    '{"email":"b@x"}': null,
    '{"team":"red"}': { _id: 1, email: 'a@x', team: 'red', active: true, n: 1 },
    '{"team":"red","active":true}': null,
    '{"n":3}': null,
  }
  const writes: Array<[string, RemoteWrite]> = [
    ['insert _id 2', summarize([buildInsert({ _id: 2, email: 'b@x', team: 'blue' }, undefined)], none)],
    ['update _id 1 $inc n', summarize([buildUpdate(false, { _id: 1 }, { $inc: { n: 1 } }, undefined)], none)],
    ['update _id 5 $set team red', summarize([buildUpdate(false, { _id: 5 }, { $set: { team: 'red' } }, undefined)], none)],
    ['update _id 5 $set active true', summarize([buildUpdate(false, { _id: 5 }, { $set: { active: true } }, undefined)], none)],
    ['update by email a@x', summarize([buildUpdate(false, { email: 'a@x' }, { $set: { z: 1 } }, undefined)], none)],
    ['update _id 5 $inc n', summarize([buildUpdate(false, { _id: 5 }, { $inc: { n: 1 } }, undefined)], none)],
    ['delete _id 9', summarize([buildDelete(false, { _id: 9 }, undefined)], none)],
  ]
  // what must go, by write (the server's view of which cached answers may have changed)
  const expected: Record<string, string[]> = {
    'insert _id 2': ['{"_id":2}', '{"email":"b@x"}'],
    'update _id 1 $inc n': ['{"_id":1}', '{"email":"a@x"}', '{"team":"red"}', '{"n":3}'],
    'update _id 5 $set team red': ['{"team":"red"}', '{"team":"red","active":true}'],
    'update _id 5 $set active true': ['{"team":"red","active":true}'],
    'update by email a@x': ['{"_id":1}', '{"email":"a@x"}', '{"team":"red"}'],
    'update _id 5 $inc n': ['{"n":3}'],
    'delete _id 9': [],
  }
  for (const [label, write] of writes) {
    it(label, () => {
      const store = new EntryStore({ maxEntries: 100, maxBytes: 1 << 20 })
      for (const f of filters) {
        const key = JSON.stringify(f)
        const doc = docs[key] ?? null
        store.put(key, 'users', f, false, doc === null ? null : BSON.serialize(doc), doc, 60_000, 0)
      }
      new WriteEffects(store).applyRemote('users', remoteFootprint(roundTrip(write)))
      const dropped = filters.map(f => JSON.stringify(f)).filter(k => store.get(k, 0) === undefined)
      expect(dropped).toEqual(expected[label])
      const fenced = filters.filter(f => remoteAffects(write, docs[JSON.stringify(f)] ?? null, f, false)).map(f => JSON.stringify(f))
      expect(fenced).toEqual(expected[label])
    })
  }
})

describe('cache.bus options', () => {
  it('validated once, with the value shown', () => {
    const cases: Array<[unknown, RegExp]> = [
      [{ bus: 'redis://x' }, /cache.bus must be an object/],
      [{ bus: {} }, /cache.bus.redis must be an ioredis client/],
      [{ bus: { redis: 'http://x' } }, /cache.bus.redis must be a redis:\/\/ or rediss:\/\/ URL/],
      [{ bus: { redis: { publish () {} } } }, /with publish and duplicate/],
      [{ bus: { redis: 'redis://x', channel: '' } }, /cache.bus.channel must be a non-empty string/],
      [{ bus: { redis: 'redis://x', offlineTtlMs: -1 } }, /cache.bus.offlineTtlMs must be an integer/],
      [{ bus: { redis: 'redis://x', other: 1 } }, /unknown option cache.bus.other/],
    ]
    for (const [cache, message] of cases) {
      expect(() => resolveOptions({ cache }), JSON.stringify(cache)).toThrow(InvalidOptionError)
      expect(() => resolveOptions({ cache }), JSON.stringify(cache)).toThrow(message)
    }
    expect(resolveOptions({ cache: { bus: { redis: 'rediss://h:1' } } }).cache?.bus)
      .toEqual({ redis: 'rediss://h:1', channel: 'fastify-write-buffer', offlineTtlMs: 0 })
  })
})

describe('a bus message for writes told unknown', () => {
  it('drops a cached null for any _id an upsert of them may have created', () => {
    const noUpsert = (): undefined => undefined
    const cases: Array<[WriteOp, string]> = [
      [buildUpdate(false, { email: 'x' }, { $setOnInsert: { _id: 'k' }, $set: { name: 'n' } }, { upsert: true }), 'k'],
      [buildUpdate(false, { _id: 'k2', email: 'x' }, { $set: { name: 'n' } }, { upsert: true }), 'k2'],
      [buildReplace({ email: 'x' }, { _id: 'k3', email: 'x' }, { upsert: true }), 'k3'],
    ]
    for (const [op, id] of cases) {
      const nullEntry = answerOf({ _id: id }, null, false)
      const message = remoteFootprint(decode(encode('a', 'users', summarize([op], noUpsert, false))).write)
      expect({ id, drops: affects(message, nullEntry) }).toEqual({ id, drops: true }) // was false: read as acknowledged, nothing upserted
    }
  })

  it('carries what the writes merged into them changed (a fence-end message names the batch\'s first writes only)', () => {
    const leader = buildUpdate(false, { _id: 'u1' }, { $inc: { a: 1 } }, undefined)
    const follower = buildUpdate(false, { _id: 'u1' }, { $set: { email: 'x@y' } }, undefined)
    expect(tryCoalesce(leader, follower)).toBe(true)
    const nobody = answerOf({ email: 'x@y' }, null, false) // another instance cached: no user has this email
    const message = remoteFootprint(decode(encode('a', 'users', summarize([leader], () => undefined, false))).write)
    expect(affects(message, nobody)).toBe(true) // was false: the follower's $set was left out
  })
})
