import { describeError } from '../mongo/driver-errors.js'
import type { Logger, WriteErrorInfo } from '../options.js'
import { METHOD_OF, type WriteOp } from '../write/write-op.js'

type Hook = (error: Error, info: WriteErrorInfo) => unknown

interface Unreported { info: WriteErrorInfo, first: Error, count: number }

/**
 * Where a failed detached write is told, since no promise exists to reject: `onWriteError`
 * once per write, after the turn that settled it (a hook that throws or rejects is caught and
 * logged: it can neither crash the process nor stall the buffer). Without a hook, failures
 * are logged, never with document contents: one line per collection, method, code and
 * outcome per turn, with a count, so a batch of a thousand detached writes that fails (a
 * server down) makes one log line, not a thousand. Without a logger, a process warning.
 */
export class DetachedFailures {
  readonly #unreported = new Map<string, Unreported>()

  constructor (readonly hook: Hook | undefined, readonly logger: Logger | undefined) {}

  report (op: WriteOp, err: Error): void {
    const info: WriteErrorInfo = { collection: op.queue.name, kind: METHOD_OF[op.kind], detached: true }
    const hook = this.hook
    if (hook !== undefined) {
      queueMicrotask(() => { this.#call(hook, err, info) })
      return
    }
    const code = (err as { code?: unknown }).code
    const outcome = (err as { outcome?: unknown }).outcome
    const key = `${info.collection}\0${info.kind}\0${String(code)}\0${String(outcome)}`
    const seen = this.#unreported.get(key)
    if (seen !== undefined) {
      seen.count++
      return
    }
    if (this.#unreported.size === 0) queueMicrotask(() => { this.#logUnreported() })
    this.#unreported.set(key, { info, first: err, count: 1 })
  }

  #call (hook: Hook, err: Error, info: WriteErrorInfo): void {
    try {
      const r = hook(err, info) // it may be async
      if (r instanceof Promise) r.catch((bug: unknown) => { this.#log('write buffer: onWriteError rejected', info, err, bug, 1) })
    } catch (bug) {
      this.#log('write buffer: onWriteError threw', info, err, bug, 1)
    }
  }

  #logUnreported (): void {
    for (const { info, first, count } of this.#unreported.values()) this.#log('write buffer: detached writes failed', info, first, first, count)
    this.#unreported.clear()
  }

  /** `failed`: the write's error (its code and outcome are logged); `cause`: what to describe. */
  #log (msg: string, info: WriteErrorInfo, failed: Error, cause: unknown, count: number): void {
    const { code, outcome } = failed as { code?: unknown, outcome?: unknown }
    if (this.logger !== undefined) {
      this.logger.error({ ...info, count, code, outcome, err: describeError(cause) }, msg)
    } else {
      process.emitWarning(`${msg} (${count} × ${info.kind} on ${info.collection}): ${describeError(cause)}`, { code: 'FWB_DETACHED_WRITE_FAILED' })
    }
  }
}
