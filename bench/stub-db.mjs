// The stub Db of the suites that measure our code alone (scale-dispatch, self-time): its
// bulkWrite answers after one setImmediate, as a server that costs nothing would; no driver.
const ANSWER = { insertedCount: 0, matchedCount: 0, modifiedCount: 0, deletedCount: 0, upsertedCount: 0, upsertedIds: {}, insertedIds: {} }

export function stubDb () {
  const collections = new Map()
  return {
    databaseName: 'stub',
    command: async () => ({ ok: 1 }),
    collection (name) {
      let c = collections.get(name)
      if (c === undefined) {
        c = { collectionName: name, bulkWrite: () => new Promise(resolve => setImmediate(resolve, ANSWER)) }
        collections.set(name, c)
      }
      return c
    },
  }
}
