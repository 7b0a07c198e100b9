import { afterEach, vi } from 'vitest'
import type { Document } from 'mongodb'
import {
  WriteBuffer, type BufferedCollection, type DeleteOptions, type DeleteResult, type InsertResult, type ReplaceOptions,
  type UpdateOptions, type UpdateResult, type WriteBufferOptions, type WriteOptions,
} from '../../src/index.js'
import { apply, FakeDb, track, type Settled, type Topology } from './fake-db.js'
import { FakeClock } from './fake-clock.js'

/**
 * The buffer's handle with plain `Document` arguments and `unknown` ids: what these tests
 * need of it, whatever schema a test has in mind (the default schema's handle fits as is).
 */
type Awaiting<O> = O & { detached?: false }
export interface Coll {
  readonly collectionName: string
  insertOne: (doc: Document, options?: Awaiting<WriteOptions>) => Promise<InsertResult>
  updateOne: (filter: Document, update: Document | Document[], options?: Awaiting<UpdateOptions>) => Promise<UpdateResult>
  updateMany: (filter: Document, update: Document | Document[], options?: Awaiting<UpdateOptions>) => Promise<UpdateResult>
  replaceOne: (filter: Document, replacement: Document, options?: Awaiting<ReplaceOptions>) => Promise<UpdateResult>
  deleteOne: (filter: Document, options?: Awaiting<DeleteOptions>) => Promise<DeleteResult>
  deleteMany: (filter: Document, options?: Awaiting<DeleteOptions>) => Promise<DeleteResult>
}

export function loose (handle: BufferedCollection): Coll {
  return handle
}

export interface Harness {
  fake: FakeDb
  wb: WriteBuffer
  /** the buffer's handle on collection 'c' */
  c: Coll
}

// a broken buffer shows up as a write that never settles: fail in seconds, not the config's minute
vi.setConfig({ testTimeout: 5_000, hookTimeout: 5_000 })

/**
 * The time limit of a test that moves 100,000 writes or documents of 10-16 MiB: 0.2-1 s on this
 * 2-core machine alone, thirty times that on a loaded one (the 16 MiB insert test took 0.19 s
 * alone, 5.7 s beside eight CPU burners), past the 5 s above. `it(name, HEAVY, fn)`.
 */
export const HEAVY = { timeout: 60_000 }

const open: Harness[] = []

/** A WriteBuffer on a fresh fake db (on the fake clock after useFakeClock()); closed after the test whatever happened. */
export function harness (options?: WriteBufferOptions, topology?: Topology): Harness {
  const fake = new FakeDb(topology)
  const wb = new WriteBuffer(fake.db, fakeClock === undefined || options?.clock !== undefined ? options : { ...options, clock: fakeClock })
  const h = { fake, wb, c: loose(wb.collection('c')) }
  open.push(h)
  return h
}

afterEach(async () => {
  vi.useRealTimers()
  fakeClock = undefined
  for (const { fake, wb } of open.splice(0)) {
    // a failed test may leave calls held: answer them so close() can drain
    fake.fallback = apply
    for (const call of fake.held) call.answer(apply)
    await wb.close()
  }
})

/** Two bulkWrites were on the wire at the same time (an unanswered one lasts forever). */
export function overlapping (a: { startedAt: number, answeredAt: number }, b: { startedAt: number, answeredAt: number }): boolean {
  const aEnd = a.answeredAt === -1 ? Infinity : a.answeredAt
  const bEnd = b.answeredAt === -1 ? Infinity : b.answeredAt
  return a.startedAt < bEnd && b.startedAt < aEnd
}

let fakeClock: FakeClock | undefined

/**
 * A fake clock for the buffers harness() makes from now on (their `clock` option: every
 * deadline, linger, backoff and fence of theirs reads it), for tests whose writes wait out a
 * backoff (or a fence after an unknown outcome) that real time would make slow; the test's own
 * timers (the fake db's held answers) move with it on vitest's fake timers. setImmediate and
 * microtasks stay real, so sending works unchanged. Restored after each test.
 */
export function useFakeClock (): FakeClock {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] })
  fakeClock = new FakeClock(Date.now())
  return fakeClock
}

/** Moves the fake clock (and the test's fake timers) `ms` on, then lets one event-loop turn run. */
export async function advance (ms: number): Promise<void> {
  fakeClock?.advance(ms)
  await vi.advanceTimersByTimeAsync(ms)
  await new Promise<void>(resolve => setImmediate(resolve))
}

/** Moves the fake clock on, 50 ms per event-loop turn, until `p` settles (up to 10 fake minutes). */
export async function fastForward<T> (p: Promise<T>): Promise<Settled<T>> {
  const t = track(p)
  for (let i = 0; i < 12_000 && !t.done; i++) await advance(50)
  return t.promise
}
