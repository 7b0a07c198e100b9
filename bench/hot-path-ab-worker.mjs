// Child process of hot-path-ab.mjs: the CPU time (user + system, every thread of the process:
// the collector's and the compiler's too) of one write through one build, over a no-op sink.
// argv[2]: { module, kind, ops, warm, jitter } — module: the dist/index.js to measure; kind:
// insertOne | updateOne; jitter: each round first allocates a seeded-random amount of garbage,
// so the young generation's collections do not land at the same point of every round (with
// rounds of one fixed size they can, and one build then pays for a grown young generation in
// every run while the other never does). Prints nanoseconds per write.
const { module, kind, ops, warm, jitter } = JSON.parse(process.argv[2])
const { WriteBuffer } = await import(module)

/** Bench-only stand-in for a mongodb Db: every bulkWrite succeeds at once. */
const fakeDb = { collection: name => ({ collectionName: name, bulkWrite: async () => ({ upsertedIds: {} }) }) }
const wb = new WriteBuffer(fakeDb, { maxBatchSize: 1000 })
const col = wb.collection('c')
const write = kind === 'updateOne' ? i => col.updateOne({ _id: i }, { $set: { v: i } }) : i => col.insertOne({ i, s: 'x' })

const ROUND = 1000 // writes awaited together: one batch each
let seed = 12345
const random = () => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed / 0x7fffffff }
/** the round's garbage, alive until the next round's */
const held = { garbage: null }

async function run (n) {
  for (let done = 0; done < n; done += ROUND) {
    if (jitter) held.garbage = new Array(Math.floor(random() * 4 * ROUND)).fill(0)
    const promises = new Array(ROUND)
    for (let i = 0; i < ROUND; i++) promises[i] = write(i)
    await Promise.all(promises)
  }
}

await run(warm)
const start = process.cpuUsage()
await run(ops)
const used = process.cpuUsage(start)
await wb.close()
process.stdout.write(String((used.user + used.system) * 1000 / ops))
