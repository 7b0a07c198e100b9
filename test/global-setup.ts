import type { TestProject } from 'vitest/node'
// @ts-expect-error plain ESM script shared with the npm scripts
import { resolveMongo } from '../scripts/resolve-db.mjs'

declare module 'vitest' {
  export interface ProvidedContext {
    mongoUri: string
  }
}

let stop: (() => Promise<void>) | undefined

export async function setup (project: TestProject): Promise<void> {
  const db = await resolveMongo() as { uri: string, source: string, stop: () => Promise<void> }
  console.error(`[db] tests use ${db.source}: ${db.uri}`)
  stop = db.stop
  project.provide('mongoUri', db.uri)
}

export async function teardown (): Promise<void> {
  await stop?.()
}
