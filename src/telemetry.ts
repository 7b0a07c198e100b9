import diagnostics from 'node:diagnostics_channel'

/**
 * `node:diagnostics_channel` telemetry, free when nobody listens: one message per bulkWrite
 * (never per write), `{ collection, ops, durationMs, error? }`, published after its callers
 * were settled. Subscribe with `diagnostics_channel.subscribe(BATCH_CHANNEL, fn)`.
 */
export const BATCH_CHANNEL = 'fastify-write-buffer:batch'

export interface BatchMessage {
  collection: string
  /** ops in the bulkWrite (a coalesced op counts once) */
  ops: number
  durationMs: number
  /** the driver's error when the bulkWrite failed (in whole or in part) */
  error?: unknown
}

export const batchChannel = diagnostics.channel(BATCH_CHANNEL)

export function publishBatch (collection: string, ops: number, durationMs: number, error: unknown): void {
  const message: BatchMessage = { collection, ops, durationMs }
  if (error !== undefined) message.error = error
  batchChannel.publish(message)
}
