import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { describe, expect, it } from 'vitest'
import type { Collection } from 'mongodb'
import { ReadCache } from '../../src/cache/read-cache.js'
import { HEAVY } from './harness.js'

/**
 * Collection names may be many (a collection per tenant, per day): what the read cache keeps
 * per collection must go once nothing of that collection is in progress. Measured as retained
 * heap per name after 50,000 names, with a full GC before and after.
 */

setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void

const NAMES = 50_000

function retainedPerName (run: (name: string) => void | Promise<void>): Promise<number> {
  return (async () => {
    gc()
    const before = process.memoryUsage().heapUsed
    for (let i = 0; i < NAMES; i++) await run(`tenant_${i}_${'x'.repeat(24)}`)
    gc()
    return (process.memoryUsage().heapUsed - before) / NAMES
  })()
}

// nothing cached (TTLs 0): only the per-collection bookkeeping is measured
const options = { ttlMs: 0, negativeTtlMs: 0, maxEntries: 10, maxBytes: 1 << 20, bus: undefined }
const collection = { findOne: async () => null, bsonOptions: {} } as unknown as Collection

describe('per-collection state of the read cache, with many collection names', () => {
  it('a fence that ended leaves nothing behind in its collection', HEAVY, async () => {
    const cache = new ReadCache(options)
    const perName = await retainedPerName(name => { cache.fenced(name, [], true); cache.fenced(name, [], false) })
    console.log(`[cache names] fences: ${perName.toFixed(1)} bytes retained per collection name`)
    // was ~90 bytes: Fences.#endedAt kept every collection whose fence ever ended (and the allows() fast path was off for good)
    expect(perName).toBeLessThan(20)
  })

  it('a read that ended leaves no set of reads in progress behind in its collection (only the name, as a collection read before)', HEAVY, async () => {
    const cache = new ReadCache(options)
    const perName = await retainedPerName(async name => { await cache.findOne(collection, name, { _id: 1 }) })
    console.log(`[cache names] reads: ${perName.toFixed(1)} bytes retained per collection name`)
    // was ~400 bytes; ~200 of them an empty Set per name in ReadCache.#flightsByName. The ~200 left
    // are the name itself, kept on purpose: a collection once read is watched (noted-writes.ts)
    expect(perName).toBeLessThan(300)
  })
})
