// `fastify-write-buffer/core`: everything except the Fastify plugin. Nothing reachable from
// here imports Fastify, so its declarations compile in a project without `fastify` installed.
export { WriteBuffer, type WriteBufferStats } from './write-buffer.js'
export { BufferedCollection, type AnyDocument, type CollectionOptions, type Detached, type NotDetached, type IdOf, type InsertDocument } from './collection.js'
export { ReadCache, type ReadCacheStats } from './cache/read-cache.js'
export {
  ErrorCodes, WriteBufferError, InvalidWriteError, InvalidOptionError, WriteRejectedError, ConnectError,
  type ErrorCode, type WriteOutcome,
} from './errors.js'
export type { WriteBufferOptions, CacheOptions, CacheBusOptions, RedisClientLike, RetryOptions, Logger, WriteErrorInfo } from './options.js'
export type { BusStats } from './cache/bus.js'
export type { WriteOptions, UpdateOptions, ReplaceOptions, DeleteOptions } from './write/build-op.js'
export type { InsertResult, UpdateResult, DeleteResult, WriteResult, TraceLink } from './write/write-op.js'
export type { LatencySummary } from './buffer/latency.js'
export { BATCH_CHANNEL, type BatchMessage } from './telemetry.js'
