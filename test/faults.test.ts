import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { MongoClient, type Db } from 'mongodb'
import { WriteBuffer } from '../src/index.js'
import { FaultProxy, hostPortOf } from './support/fault-proxy.js'
import { insertCopies as copiesIn, MonitorWatch, monitorState, sleep, within } from './support/fault-run.js'
import { Ledger } from './support/ledger.js'
import { mongoUri, openDb } from './helpers.js'

// The real server stopped and started again: test/server-restart.test.ts (beside the other
// integration files; these ones run alone: they stop, stall or cut the shared server's traffic).
const target = hostPortOf(mongoUri())
/** Polls `done` (set by writes settling elsewhere) every 20 ms until it holds. */
async function until (done: () => boolean): Promise<void> {
  while (!done()) await sleep(20)
}

let direct: MongoClient
let directDb: Db
let proxy: FaultProxy
let client: MongoClient
let db: Db
const watch = new MonitorWatch()
const report: Record<string, ReturnType<Ledger['audit']> & { unsettled: number }> = {}

const insertCopies = (name: string): Promise<Map<number, number>> => copiesIn(name, directDb)

describe.skipIf(target === undefined)('faults: nothing lost, nothing applied twice, every promise settles', () => {
  beforeAll(async () => {
    ({ client: direct, db: directDb } = await openDb('faults'))
    proxy = await FaultProxy.start(target!.host, target!.port)
  })
  // each test its own client through the proxy: whatever a fault leaves in one client's state
  // (its pool, its server monitor) cannot fail the tests after it
  beforeEach(async () => {
    proxy.up()
    proxy.resume()
    client = new MongoClient(proxy.uri(mongoUri()), { serverSelectionTimeoutMS: 1500, socketTimeoutMS: 20_000, maxPoolSize: 20 })
    watch.watch(client)
    await client.connect()
    db = client.db(directDb.databaseName)
  })
  afterEach(async (ctx) => {
    if (ctx.task.result?.state === 'fail') {
      console.log(`${ctx.task.name}: the driver's view of the proxied server\n` + JSON.stringify({ proxyUpstreamErrors: proxy.upstreamErrors, proxyConnections: proxy.connections, ...watch.report(monitorState(client)) as object }, null, 1))
    }
    watch.reset()
    await client.close()
  })
  afterAll(async () => {
    console.log('fault suite report\n' + JSON.stringify(report, null, 1))
    await proxy?.close()
    await direct?.close()
  })

  it('connections cut during flushes under concurrent load', async () => {
    await directDb.collection('cut_inc').insertMany(Array.from({ length: 200 }, (_, k) => ({ _id: k, n: 0 })) as never[])
    await directDb.collection('cut_set').insertMany(Array.from({ length: 200 }, (_, k) => ({ _id: k })) as never[])
    const wb = new WriteBuffer(db, {
      maxTimeMS: 300,
      maxBatchSize: 200,
      lingerMs: 2,
      maxInFlight: 4,
      writeTimeoutMs: 30_000,
      retry: { maxAttempts: 8, baseDelayMs: 20, maxDelayMs: 300 },
    })
    const inserts = new Ledger()
    const incs = new Ledger()
    const sets = new Ledger()
    const ev = wb.collection('cut_events')
    const counters = wb.collection('cut_inc')
    const setDocs = wb.collection('cut_set')
    const pending: Array<Promise<void>> = []
    const stopCutting = new AbortController()
    const chaos = (async () => {
      let k = 0
      while (!stopCutting.signal.aborted) {
        await sleep(25 + Math.random() * 40)
        if (k++ % 2 === 0) proxy.cutAll()
        else proxy.dropAfter(Math.floor(Math.random() * 20_000))
      }
    })()
    for (let wave = 0; wave < 20; wave++) {
      for (let j = 0; j < 200; j++) {
        const marker = wave * 200 + j
        pending.push(inserts.track(marker, ev.insertOne({ marker, wave })))
      }
      if (wave < 10) {
        for (let j = 0; j < 20; j++) {
          const k = wave * 20 + j
          pending.push(incs.track(k, counters.updateOne({ _id: k }, { $inc: { n: 1 } })))
          pending.push(sets.track(k, setDocs.updateOne({ _id: k }, { $set: { [`s${wave}`]: k } })))
        }
      }
      await sleep(15)
    }
    await sleep(300)
    stopCutting.abort()
    await chaos
    await within(90_000, Promise.all(pending))
    expect(inserts.unsettled + incs.unsettled + sets.unsettled).toBe(0)

    const insertAudit = inserts.audit(await insertCopies('cut_events'))
    const docs = await directDb.collection('cut_inc').find().toArray()
    const incAudit = incs.audit(new Map(docs.map(d => [d._id as unknown as number, d.n as number])))
    const setDocsNow = await directDb.collection('cut_set').find().toArray()
    const setAudit = sets.audit(new Map(setDocsNow.map(d => [d._id as unknown as number, Object.keys(d).some(key => key.startsWith('s')) ? 1 : 0])))
    report.cutInserts = { ...insertAudit, unsettled: inserts.unsettled }
    report.cutInc = { ...incAudit, unsettled: incs.unsettled }
    report.cutSet = { ...setAudit, unsettled: sets.unsettled }
    for (const audit of [insertAudit, incAudit, setAudit]) {
      expect(audit.lost).toBe(0)
      expect(audit.duplicated).toBe(0)
      expect(audit.phantom).toBe(0)
    }
    expect(insertAudit.attempted).toBe(4000)
    expect(proxy.cuts).toBeGreaterThan(0)
    expect(wb.stats().retries).toBeGreaterThan(0) // the faults were real
    // inserts are retry-safe: every one ends acknowledged unless its deadline ran out
    expect(insertAudit.acknowledged).toBeGreaterThan(3900)
    expect(wb.stats().pending).toBe(0)
    await wb.close()
  }, 120_000)

  it('server down and back up during load', async () => {
    const wb = new WriteBuffer(db, {
      maxTimeMS: 300,
      // while down, selection fails fast: give the retries ~15 s of budget
      maxBatchSize: 100,
      lingerMs: 2,
      writeTimeoutMs: 30_000,
      retry: { maxAttempts: 40, baseDelayMs: 50, maxDelayMs: 500 },
    })
    const ledger = new Ledger()
    const c = wb.collection('down_events')
    const pending: Array<Promise<void>> = []
    let downAt = 0
    for (let i = 0; i < 2000; i++) {
      pending.push(ledger.track(i, c.insertOne({ marker: i })))
      if (i === 500) { proxy.down(); downAt = Date.now() }
      if (i % 100 === 0) await sleep(10)
    }
    await sleep(1500)
    proxy.up()
    const downMs = Date.now() - downAt
    await within(90_000, Promise.all(pending))
    console.log(`server down for ${downMs} ms; retries: ${wb.stats().retries}`)
    const audit = ledger.audit(await insertCopies('down_events'))
    report.serverDown = { ...audit, unsettled: ledger.unsettled }
    if (audit.acknowledged < 2000) console.log('server down: callers told', ledger.failures())
    expect(audit.lost).toBe(0)
    expect(audit.duplicated).toBe(0)
    expect(audit.phantom).toBe(0)
    expect(audit.acknowledged).toBe(2000) // retried after recovery, nothing given up
    await wb.close()
  }, 120_000)

  it('a stalled server: memory bounded by maxPending, reject answers at once, recovery drains', async () => {
    const v8 = await import('node:v8')
    const vm = await import('node:vm')
    v8.setFlagsFromString('--expose-gc')
    const gc = vm.runInNewContext('gc') as () => void
    const wb = new WriteBuffer(db, { maxTimeMS: 300, maxPending: 10_000, onFull: 'reject', maxBatchSize: 1000 })
    const c = wb.collection('stall_events')
    await c.insertOne({ warm: true }) // connection ready before the stall
    proxy.stall()
    gc()
    const heapBefore = process.memoryUsage().heapUsed
    // the test keeps counts, not the 200k promises, so only the buffer can hold memory
    let full = 0
    let ok = 0
    let other = 0
    for (let chunk = 0; chunk < 20; chunk++) {
      let fullBefore = full
      for (let i = 0; i < 10_000; i++) {
        c.insertOne({ marker: chunk * 10_000 + i, pad: 'x'.repeat(50) }).then(
          () => { ok++ },
          (e: { code?: string }) => { if (e.code === 'WRITE_BUFFER_FULL') full++; else other++ })
      }
      await sleep(0)
      if (chunk > 0) expect(full - fullBefore).toBe(10_000) // over the limit: rejected at once, not queued
      fullBefore = full
    }
    await sleep(50)
    gc()
    const growthMb = (process.memoryUsage().heapUsed - heapBefore) / 1024 / 1024
    expect(wb.stats().pending).toBe(10_000)
    expect(full).toBe(190_000)
    // 10k queued docs of ~100 bytes each; unbounded queuing of 200k would be far above this
    expect(growthMb).toBeLessThan(40)
    const cpuBefore = process.cpuUsage()
    const batchesBefore = wb.stats().batches
    await sleep(500)
    const cpu = process.cpuUsage(cpuBefore)
    expect(wb.stats().batches).toBe(batchesBefore) // no busy re-sending while stalled
    expect((cpu.user + cpu.system) / 1000).toBeLessThan(250)
    proxy.resume()
    await within(60_000, until(() => ok + other >= 10_000))
    expect(other).toBe(0)
    expect(ok).toBe(10_000)
    expect(await directDb.collection('stall_events').countDocuments({ marker: { $exists: true } })).toBe(10_000)
    report.stall = { attempted: 200_000, acknowledged: ok, found: ok, lost: 0, duplicated: 0, phantom: 0, unknown: 0, unsettled: 0 }
    console.log(`stall: heap growth ${growthMb.toFixed(1)} MB for 200k writes with maxPending 10k`)
    await wb.close()
  }, 120_000)

  it('close() never hangs past closeTimeoutMs and tells every unsent caller; deadlines fire while stalled', async () => {
    const wb = new WriteBuffer(db, { maxTimeMS: 300, maxInFlight: 1, maxBatchSize: 10, closeTimeoutMs: 500 })
    const c = wb.collection('stall_close')
    await c.insertOne({ warm: true })
    proxy.stall()
    const first = c.insertOne({ n: 0 }) // goes on the wire and hangs
    await sleep(20)
    const timed = c.insertOne({ n: 'deadline' }, { timeoutMs: 150 })
    const queued = Array.from({ length: 30 }, (_, i) => c.insertOne({ n: i + 1 }))
    await expect(timed).rejects.toMatchObject({ code: 'WRITE_BUFFER_TIMEOUT', outcome: 'not-sent' })
    const t0 = Date.now()
    await wb.close()
    expect(Date.now() - t0).toBeLessThan(1500)
    const results = await Promise.allSettled(queued)
    expect(results.every(r => r.status === 'rejected' && (r.reason as { code: string }).code === 'WRITE_BUFFER_CLOSED')).toBe(true)
    proxy.resume()
    await expect(within(30_000, first)).resolves.toMatchObject({ insertedId: expect.anything() })
    expect(await directDb.collection('stall_close').countDocuments({ n: { $exists: true } })).toBe(1)
  }, 60_000)
})
