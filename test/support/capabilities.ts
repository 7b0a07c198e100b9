import { inject } from 'vitest'

/**
 * Server behaviours some tests depend on, probed once on the suite's server by the global setup
 * (scripts/server-info.mjs says what each probe checks). A test that needs one skips where the
 * server lacks it, stating which: `it.skipIf(lacks('arrayFilters'))(…)` titles carry the name,
 * and `skipUnless(ctx, 'arrayFilters')` gives the reason as the skip's note.
 */
export type Capability =
  | 'perStatementInsertErrors'
  | 'perStatementErrors'
  | 'arrayFilters'
  | 'pipelineUpdates'
  | 'collationOnUpdate'
  | 'hintChecked'
  | 'newFieldsInPathOrder'
  | 'rename'
  | 'decimal128'
  | 'replicaSet'
  | 'retryableWritesExactlyOnce'
  | 'transactions'
  | 'changeStreams'
  | 'clientBulkWrite'

export type Capabilities = Record<Capability, boolean>

export interface ServerInfo {
  /** what the server is, from buildInfo: 'mongodb' | 'ferretdb' (FerretDB 1.x) | 'docdb' (FerretDB 2.x + DocumentDB) */
  engine: 'mongodb' | 'ferretdb' | 'docdb'
  name: string
  version: string
  /** how the setup found it (MONGODB_URI, ferretdb, docdb, docdb-rs: docdb as a replica set, mongodb-memory-server…) */
  source: string
}

declare module 'vitest' {
  export interface ProvidedContext {
    capabilities: Capabilities
    /** each capability's name as skips state it ("per-statement errors", "arrayFilters"…) */
    capabilityNames: Record<Capability, string>
    server: ServerInfo
  }
}

export const capabilities = (): Capabilities => inject('capabilities')
export const server = (): ServerInfo => inject('server')

/** Whether the suite's server lacks `cap` (for `it.skipIf`). */
export const lacks = (cap: Capability): boolean => !capabilities()[cap]

/** Why a test needing `cap` cannot run on this server. */
export function missing (cap: Capability): string {
  const s = server()
  return `needs "${inject('capabilityNames')[cap]}", which this server (${s.name} ${s.version}) lacks`
}

/** Skips the running test, saying which capability is missing, where the server lacks `cap`. */
export function skipUnless (ctx: { skip: (condition: boolean, note?: string) => void }, cap: Capability): void {
  ctx.skip(lacks(cap), missing(cap))
}
