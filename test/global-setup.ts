import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { MongoClient } from 'mongodb'
import type { ProvidedContext } from 'vitest'
import type { TestProject } from 'vitest/node'
// @ts-expect-error plain ESM script shared with the npm scripts
import { ENGINE_SERVERS, docdbMissing, docdbScript, resolveMongo } from '../scripts/resolve-db.mjs'
// @ts-expect-error plain ESM script shared with the npm scripts and the bench
import { CAPABILITIES, capabilityLines, describeServer, probeCapabilities } from '../scripts/server-info.mjs'
// @ts-expect-error plain ESM script shared with the bench
import { resolveRedis } from '../scripts/redis.mjs'
import type { Capabilities, Capability, ServerInfo } from './support/capabilities.js'
import type { PrivateServerPlan } from './support/private-server.js'

declare module 'vitest' {
  export interface ProvidedContext {
    mongoUri: string
    /** the cache bus's Redis: '' when none could be started (then redisError says why) */
    redisUrl: string
    redisError: string
    privateServer: PrivateServerPlan
  }
}

const run = promisify(execFile)
const devDb = fileURLToPath(new URL('../scripts/dev-db.sh', import.meta.url))
/**
 * The two integration projects (vitest.config.ts) share one server, one probe and one Redis:
 * vitest calls setup/teardown once per project, in this one process, so the first call starts
 * everything and the last teardown stops it.
 */
interface Suite { values: Promise<Provided>, stops: Array<() => Promise<void>>, users: number }
type Provided = { [K in 'mongoUri' | 'redisUrl' | 'redisError' | 'privateServer' | 'server' | 'capabilities' | 'capabilityNames']: ProvidedContext[K] }
const shared = globalThis as { fwbSuite?: Suite }

/**
 * Whether a test that stops and restarts a server process can start a private one of the
 * suite's engine (its own ports and data, never the suite's server): FerretDB 1.24 through
 * scripts/dev-db.sh when its binary is built, FerretDB 2.5 + DocumentDB through docdb.sh (root).
 * Under FWB_ENGINE=docdb-rs (the same server behind a replica-set front end) that private server
 * is a plain docdb one, a standalone: those tests restart a process, not a replica set.
 */
async function privateServerPlan (server: ServerInfo): Promise<PrivateServerPlan> {
  if (server.engine === 'ferretdb') {
    try {
      await run('bash', [devDb, 'built'])
      return { engine: 'ferretdb', script: devDb, reason: '' }
    } catch {
      return { engine: '', script: '', reason: 'the FerretDB 1.24 binary is not built here (bash scripts/dev-db.sh build)' }
    }
  }
  if (server.engine === 'docdb') {
    const why = docdbMissing() as string | undefined
    if (why !== undefined) return { engine: '', script: '', reason: why }
    if (process.getuid?.() !== 0) return { engine: '', script: '', reason: 'docdb.sh starts servers as root only' }
    return { engine: 'docdb', script: docdbScript() as string, reason: '' }
  }
  return { engine: '', script: '', reason: `the suite runs on ${server.name} ${server.version} (${server.source}), of which this project cannot start a private instance` }
}

export async function setup (project: TestProject): Promise<void> {
  const suite = shared.fwbSuite ??= { values: Promise.resolve({} as Provided), stops: [], users: 0 }
  if (suite.users++ === 0) suite.values = start(suite.stops)
  let values: Provided
  try {
    values = await suite.values
  } catch (err) {
    await teardown() // what was started before the failure
    throw err
  }
  for (const key of Object.keys(values) as Array<keyof Provided>) project.provide(key, values[key])
}

async function start (stops: Suite['stops']): Promise<Provided> {
  const db = await resolveMongo() as { uri: string, source: string, stop: () => Promise<void> }
  stops.push(db.stop)
  // what the server is and which behaviours the tests may rely on: measured, not assumed
  const client = new MongoClient(db.uri, { serverSelectionTimeoutMS: 30_000 })
  const described = await describeServer(client).finally(() => client.close()) as Omit<ServerInfo, 'source'>
  const server: ServerInfo = { ...described, source: db.source }
  const wanted = process.env.MONGODB_URI ? '' : process.env.FWB_ENGINE ?? ''
  // docdb-rs is docdb's server (buildInfo says docdb) that `hello` calls a replica set
  const expected = (ENGINE_SERVERS as Record<string, string>)[wanted] ?? wanted
  if (wanted !== '' && described.engine !== expected) {
    throw new Error(`FWB_ENGINE=${wanted}, but the server found at ${db.uri} is ${described.name} ${described.version} (another server on that port?)`)
  }
  const capabilities = await probeCapabilities(db.uri) as Capabilities
  if (wanted === 'docdb-rs' && !capabilities.replicaSet) {
    throw new Error(`FWB_ENGINE=docdb-rs, but the server found at ${db.uri} is not a replica set (hello has no setName)`)
  }
  console.error(`[db] tests use ${server.name} ${server.version} (${db.source}: ${db.uri}); capabilities:\n` +
    (capabilityLines(capabilities) as string[]).map(line => `[db]   ${line}`).join('\n'))
  const values: Provided = {
    mongoUri: db.uri,
    server,
    capabilities,
    capabilityNames: Object.fromEntries(Object.entries(CAPABILITIES as Record<Capability, { name: string }>)
      .map(([key, c]) => [key, c.name])) as Record<Capability, string>,
    privateServer: await privateServerPlan(server),
    redisUrl: '',
    redisError: '',
  }
  // only the cache-bus tests need Redis: without it they fail, saying why; the others run
  try {
    const redis = await resolveRedis() as { url: string, source: string, stop: () => Promise<void> }
    console.error(`[redis] tests use ${redis.source}: ${redis.url}`)
    stops.push(redis.stop)
    values.redisUrl = redis.url
  } catch (err) {
    console.error(`[redis] none: ${(err as Error).message}`)
    values.redisError = (err as Error).message
  }
  return values
}

export async function teardown (): Promise<void> {
  const suite = shared.fwbSuite
  if (suite === undefined || --suite.users > 0) return
  shared.fwbSuite = undefined
  for (const stop of suite.stops.splice(0).reverse()) await stop()
}
