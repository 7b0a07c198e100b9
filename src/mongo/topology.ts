import type { Db } from 'mongodb'

interface DriverClientView {
  options?: { retryWrites?: boolean }
  topology?: { description?: { servers?: Map<string, { type?: string }> } }
}

/**
 * Whether the driver's own retryable writes may have re-sent a batch before we saw its
 * error: on for replica sets and sharded clusters unless `retryWrites: false`; standalone
 * servers have none. Read from the client's topology description (not public API, hence the
 * narrow view); an Unknown server (down right now) says nothing, so the last known answer is
 * kept, and "may retry" is assumed until something is known.
 */
export class DriverRetries {
  readonly #client: DriverClientView | undefined
  #known: boolean | undefined

  constructor (db: Db) {
    this.#client = (db as unknown as { client?: DriverClientView }).client
  }

  mayHaveRetried (): boolean {
    const client = this.#client
    if (client?.options?.retryWrites === false) return false
    const servers = client?.topology?.description?.servers
    let known: boolean | undefined
    if (servers !== undefined) {
      for (const server of servers.values()) {
        if (server.type === 'Standalone') known ??= false
        else if (server.type !== undefined && server.type !== 'Unknown') known = true
      }
    }
    if (known !== undefined) this.#known = known
    return this.#known ?? true
  }
}
