import type { Db } from 'mongodb'

interface ClientView {
  options?: { retryWrites?: boolean }
  topology?: { description?: { servers?: Map<string, { type?: string }> } }
  on?: (event: 'serverDescriptionChanged', listener: (ev: { newDescription: { type: string } }) => void) => unknown
}

/**
 * Whether the driver's own retryable writes may have re-sent a batch before we saw its
 * error: on for replica sets and sharded clusters unless `retryWrites: false`; standalone
 * servers have none. The last server type seen other than Unknown decides, read from the
 * client's topology (a client connected before the buffer was built) and kept up to date by
 * its server monitoring events. Before any server was ever known no command can have
 * started, so there was no first attempt to retry either.
 */
export class DriverRetries {
  readonly #client: ClientView | undefined
  readonly #retryWrites: boolean
  #known: boolean | undefined

  constructor (db: Db) {
    const client = this.#client = (db as unknown as { client?: ClientView }).client
    this.#retryWrites = client?.options?.retryWrites !== false
    client?.on?.('serverDescriptionChanged', ev => { this.#learn(ev.newDescription.type) })
  }

  #learn (type: string | undefined): void {
    if (type === 'Standalone') this.#known = false
    else if (type !== undefined && type !== 'Unknown' && type !== 'PossiblePrimary') this.#known = true
  }

  mayHaveRetried (): boolean {
    this.#refresh()
    return this.#retryWrites && this.#known === true
  }

  /** Whether a server was ever reached: before that, no command can have been sent. */
  everConnected (): boolean {
    this.#refresh()
    return this.#known !== undefined
  }

  #refresh (): void {
    const servers = this.#client?.topology?.description?.servers
    if (servers !== undefined) for (const server of servers.values()) this.#learn(server.type)
  }
}
