// The stub Db of the suites that measure our code alone (scale-dispatch, self-time, the CPU
// account's in-process route): its bulkWrite answers after one setImmediate, as a server that
// costs nothing would — or, with `answerAfterMs()`, after a timer of that many ms (read per
// batch), as a server with that round trip and no CPU would; no driver.
const ANSWER = { insertedCount: 0, matchedCount: 0, modifiedCount: 0, deletedCount: 0, upsertedCount: 0, upsertedIds: {}, insertedIds: {} }

export function stubDb ({ answerAfterMs } = {}) {
  const answer = answerAfterMs === undefined
    ? () => new Promise(resolve => setImmediate(resolve, ANSWER))
    : () => new Promise(resolve => setTimeout(resolve, answerAfterMs(), ANSWER))
  const collections = new Map()
  return {
    databaseName: 'stub',
    command: async () => ({ ok: 1 }),
    collection (name) {
      let c = collections.get(name)
      if (c === undefined) {
        c = { collectionName: name, bulkWrite: answer }
        collections.set(name, c)
      }
      return c
    },
  }
}
