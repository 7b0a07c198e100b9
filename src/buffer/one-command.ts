import type { BatchLimits } from './batch.js'

/** Where the driver splits a bulkWrite in two commands: maxBsonObjectSize. */
const ONE_COMMAND_BYTES = 16 * 1024 * 1024
/** What the driver counts per statement past a write's own estimate: its wrapper ({q, u, upsert, multi}) and index key. */
const STATEMENT_WRAPPER_BYTES = 64

/**
 * What one batch may hold so that it goes as one command (a failure between two commands of
 * one batch would be read as the whole batch's): the options' maxBatchSize and maxBatchBytes,
 * with room under 16 MiB for every statement's wrapper, and one fewer writes than the server's
 * maxWriteBatchSize (hello), since the driver starts a new command when one more write would
 * reach it (bulk/unordered.js: `size + 1 >= maxWriteBatchSize`; hence maxBatchSize's own
 * ceiling, 99,999, below MongoDB's 100,000).
 */
export class OneCommand {
  #limits: BatchLimits
  /** maxBytes as the options and the 16 MiB command allow */
  readonly #maxBytes: number

  constructor (
    readonly options: BatchLimits,
    readonly serverMaxCount?: () => number | undefined,
    /** a lower byte bound while the batch must fit one command body (wire.ts#commandMaxBytes) */
    readonly commandMaxBytes?: () => number | undefined
  ) {
    const maxBytes = this.#maxBytes = Math.min(options.maxBytes, ONE_COMMAND_BYTES - options.maxCount * STATEMENT_WRAPPER_BYTES)
    this.#limits = maxBytes === options.maxBytes ? options : { ...options, maxBytes }
  }

  /** The limits as last read (`current()`). */
  get limits (): BatchLimits { return this.#limits }

  /** The limits with the server's maxWriteBatchSize and the command bound as known now (one object, replaced only when it changes). */
  current (): BatchLimits {
    const server = this.serverMaxCount?.()
    const maxCount = server === undefined ? this.options.maxCount : Math.min(this.options.maxCount, Math.max(1, server - 1))
    const inline = this.commandMaxBytes?.()
    const maxBytes = inline === undefined ? this.#maxBytes : Math.min(this.#maxBytes, inline)
    if (maxCount !== this.#limits.maxCount || maxBytes !== this.#limits.maxBytes) this.#limits = { ...this.#limits, maxCount, maxBytes }
    return this.#limits
  }
}
