import { afterAll, afterEach, beforeAll } from 'vitest'
import { MongoClient, type Db, type MongoClientOptions } from 'mongodb'
import { mongoUri, openDb } from '../helpers.js'
import { FaultProxy } from './fault-proxy.js'

/** What a test file gets from proxiedSuite(): the proxy, a direct client on its database, clients through the proxy. */
export interface ProxiedSuite {
  /** the fault proxy in front of the suite's server (started before the file's tests) */
  readonly proxy: FaultProxy
  /** a client straight to the server, on the file's own database: to seed and to check */
  readonly direct: { client: MongoClient, db: Db }
  /** a connected client through the proxy (closed after the test, or after the file: see proxiedSuite) */
  through: (options?: MongoClientOptions) => Promise<MongoClient>
  /** closes `client` when through() clients close (for one made otherwise: listeners before connect, another proxy) */
  closes: (client: MongoClient) => MongoClient
}

/**
 * The fault proxy in front of the suite's server for one test file, with its own database
 * (`fwb_<name>`: openDb) reached directly beside it. Registers the file's hooks: the proxy and
 * the direct client start before its tests and close after them; clients opened with
 * `through()` close after each test with `perTest` (its rules cleared too), else after the file.
 */
export function proxiedSuite (name: string, { perTest = false }: { perTest?: boolean } = {}): ProxiedSuite {
  let proxy: FaultProxy | undefined
  let direct: { client: MongoClient, db: Db } | undefined
  const clients: MongoClient[] = []
  const closeClients = async (): Promise<void> => { await Promise.all(clients.splice(0).map(async c => { await c.close(true) })) }
  beforeAll(async () => {
    direct = await openDb(name)
    proxy = await FaultProxy.start(mongoUri())
  })
  if (perTest) {
    afterEach(async () => {
      proxy?.clear()
      await closeClients()
    })
  }
  afterAll(async () => {
    await closeClients()
    await proxy?.close()
    await direct?.client.close()
  })
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('proxiedSuite: read before its beforeAll ran')
    return value
  }
  return {
    get proxy () { return started(proxy) },
    get direct () { return started(direct) },
    closes: client => {
      clients.push(client)
      return client
    },
    through: async (options = {}) => {
      const client = new MongoClient(started(proxy).uri(), { serverSelectionTimeoutMS: 20_000, ...options })
      clients.push(client)
      await client.connect()
      return client
    },
  }
}
