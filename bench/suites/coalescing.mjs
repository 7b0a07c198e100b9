// Suite 5: 1,000 updates on 10 hot documents, naive vs through the buffer (coalesced).
import { WriteBuffer } from '../../dist/index.js'
import { byKey } from '../by-key.mjs'
import { freshDb } from '../db.mjs'
import { withProgress } from '../progress.mjs'
import { latency, rate, ratio } from '../stats.mjs'
import { timed } from '../timed.mjs'

const UPDATES = 1000
const HOT = 10
const IN_FLIGHT = 100

/**
 * Update i: document i % 10; `$inc` of one field and `$set` of another alternate in runs of 10
 * (each document gets both). `count` / `last`: the second field sorts after the first, so the
 * two merge into one statement whatever fields the document already has. `n` / `last`: the
 * second sorts first, and the merge is refused, because one update creates two new fields in
 * name order and two updates in the order they run (src/write/coalesce.ts): each document then
 * costs one statement per operator.
 */
const SHAPES = {
  ordered: { inc: 'count', set: 'last' },
  refused: { inc: 'n', set: 'last' },
}
const target = i => ({ _id: i % HOT })
const update = (shape, i) => (Math.floor(i / HOT) % 2 === 0 ? { $inc: { [shape.inc]: 1 } } : { $set: { [shape.set]: i } })

function expected () {
  const docs = Array.from({ length: HOT }, (_, id) => ({ _id: id, n: 0, last: null }))
  for (let i = 0; i < UPDATES; i++) {
    if (Math.floor(i / HOT) % 2 === 0) docs[i % HOT].n++
    else docs[i % HOT].last = i
  }
  return docs
}

export async function coalescingSuite ({ uri }) {
  const { client, db, commands } = await freshDb(uri, 'coalescing')
  const want = expected()
  const variants = [
    {
      key: 'naive',
      shape: SHAPES.ordered,
      name: `naive awaited updateOne, ${IN_FLIGHT} in flight`,
      run: (col, shape) => timed({ workers: IN_FLIGHT, minCalls: UPDATES, maxCalls: UPDATES }, i => col.updateOne(target(i), update(shape, i))),
    },
    {
      key: 'buffered',
      shape: SHAPES.ordered,
      name: `WriteBuffer updateOne, all ${UPDATES} concurrent`,
      run: (col, shape) => bufferedUpdates(db, col.collectionName, shape),
    },
    {
      key: 'refused',
      shape: SHAPES.refused,
      name: `WriteBuffer updateOne, all ${UPDATES} concurrent, $set field sorting before the $inc one`,
      run: (col, shape) => bufferedUpdates(db, col.collectionName, shape),
    },
  ]
  const results = []
  for (const v of variants) {
    const col = db.collection(v.key)
    await col.insertMany(Array.from({ length: HOT }, (_, id) => ({ _id: id, [v.shape.inc]: 0 })))
    const snap = commands.snapshot()
    const run = await withProgress(`coalescing: ${v.name}`, () => v.run(col, v.shape))
    const updates = commands.since(snap, 'update', v.key)
    const docs = await col.find().sort({ _id: 1 }).toArray()
    const countsCorrect = want.every((w, id) => docs[id]?.[v.shape.inc] === w.n)
    const lastWriteWins = want.every((w, id) => docs[id]?.[v.shape.set] === w.last)
    results.push({
      key: v.key,
      name: v.name,
      fields: `$inc ${v.shape.inc}, $set ${v.shape.set}`,
      updates: UPDATES,
      rate: rate(UPDATES, run.elapsedMs),
      ...latency(run.latencies),
      dbCommandsPer1kWrites: updates.commands * (1000 / UPDATES),
      updateCommands: updates.commands,
      updateStatements: updates.statements,
      countsCorrect,
      lastWriteWins,
      finalN: docs.map(d => d[v.shape.inc]),
    })
  }
  await client.close()
  const { naive, buffered } = byKey(results)
  const mismatches = results.filter(r => !r.countsCorrect)
    .map(r => `${r.name}: final n per document ${JSON.stringify(r.finalN)}, expected ${want[0].n} each (lost updates)`)
  return {
    title: `Coalescing: ${UPDATES} updates on ${HOT} hot documents`,
    unit: 'updates/s',
    latencyIs: 'per update call',
    results,
    ratios: { bufferedVsNaive: ratio(buffered.rate, naive.rate) },
    mismatches,
    notes: [
      'lastWriteWins: every document ends with the $set of the last update issued to it (submission order kept)',
      'fields: the buffered row\'s $set field sorts after its $inc field, so the two merge exactly; the refused row\'s sorts before it, and merging would change the order new fields are created in: one statement per operator per document',
      ...(naive.countsCorrect ? [] : ['naive lost updates: this server applies concurrent updates of one document without isolation (FerretDB 1.x: read-modify-write); the buffer never has two writes of one document in flight']),
    ],
  }
}

async function bufferedUpdates (db, name, shape) {
  const wb = new WriteBuffer(db)
  const col = wb.collection(name)
  const latencies = new Array(UPDATES)
  const start = performance.now()
  await Promise.all(Array.from({ length: UPDATES }, (_, i) => {
    const t = performance.now()
    return col.updateOne(target(i), update(shape, i)).then(() => { latencies[i] = performance.now() - t })
  }))
  const elapsedMs = performance.now() - start
  await wb.close()
  return { elapsedMs, latencies }
}
