import type { TestProject } from 'vitest/node'
// @ts-expect-error plain ESM script shared with the npm scripts
import { resolveMongo } from '../scripts/resolve-db.mjs'
// @ts-expect-error plain ESM script shared with the bench
import { resolveRedis } from '../scripts/redis.mjs'

declare module 'vitest' {
  export interface ProvidedContext {
    mongoUri: string
    /** the cache bus's Redis: '' when none could be started (then redisError says why) */
    redisUrl: string
    redisError: string
  }
}

const stops: Array<() => Promise<void>> = []

export async function setup (project: TestProject): Promise<void> {
  const db = await resolveMongo() as { uri: string, source: string, stop: () => Promise<void> }
  console.error(`[db] tests use ${db.source}: ${db.uri}`)
  stops.push(db.stop)
  project.provide('mongoUri', db.uri)
  // only the cache-bus tests need Redis: without it they fail, saying why; the others run
  try {
    const redis = await resolveRedis() as { url: string, source: string, stop: () => Promise<void> }
    console.error(`[redis] tests use ${redis.source}: ${redis.url}`)
    stops.push(redis.stop)
    project.provide('redisUrl', redis.url)
    project.provide('redisError', '')
  } catch (err) {
    console.error(`[redis] none: ${(err as Error).message}`)
    project.provide('redisUrl', '')
    project.provide('redisError', (err as Error).message)
  }
}

export async function teardown (): Promise<void> {
  for (const stop of stops.reverse()) await stop()
}
