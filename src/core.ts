// `fastify-write-buffer/core`: everything except the Fastify plugin. Nothing reachable from
// here imports Fastify, so its declarations compile in a project without `fastify` installed.
export { WriteBuffer, type WriteBufferStats } from './write-buffer.js'
// BufferedCollection and ReadCache as types only: a handle comes from buffer.collection(), the cache
// from buffer.cache; their constructors and the buffer's hooks are internal (@internal, stripped)
export type { BufferedCollection, AnyDocument, CollectionOptions, Detached, NotDetached, IdOf, InsertDocument } from './collection.js'
export type { ReadCache, ReadCacheStats } from './cache/read-cache.js'
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
