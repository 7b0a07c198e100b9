import type { Db } from 'mongodb'

interface ClientView {
  options?: { retryWrites?: boolean }
  topology?: { description?: { servers?: Map<string, { type?: string }> } }
  on?: (event: 'serverDescriptionChanged', listener: (ev: { newDescription: { type: string } }) => void) => unknown
}

/** What one client's server monitoring has told us; shared by every buffer on that client. */
interface ClientState { known: boolean | undefined }

/**
 * One listener per client, however many buffers share it: a listener per buffer would never
 * be removed (the client outlives a closed buffer) and would trip Node's MaxListeners warning
 * at the eleventh buffer.
 */
const states = new WeakMap<object, ClientState>()

function stateOf (client: ClientView): ClientState {
  let state = states.get(client)
  if (state === undefined) {
    const created: ClientState = state = { known: undefined }
    states.set(client, created)
    client.on?.('serverDescriptionChanged', ev => { learn(created, ev.newDescription.type) })
  }
  return state
}

function learn (state: ClientState, type: string | undefined): void {
  if (type === 'Standalone') state.known = false
  else if (type !== undefined && type !== 'Unknown' && type !== 'PossiblePrimary') state.known = true
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
  readonly #state: ClientState
  readonly #retryWrites: boolean

  constructor (db: Db) {
    const client = this.#client = (db as unknown as { client?: ClientView }).client
    this.#retryWrites = client?.options?.retryWrites !== false
    this.#state = client === undefined ? { known: undefined } : stateOf(client)
  }

  mayHaveRetried (): boolean {
    this.#refresh()
    return this.#retryWrites && this.#state.known === true
  }

  /** Whether the deployment is one standalone server: its driver never re-sends a command on its own. */
  standalone (): boolean {
    this.#refresh()
    return this.#state.known === false
  }

  /** Whether a server was ever reached: before that, no command can have been sent. */
  everConnected (): boolean {
    this.#refresh()
    return this.#state.known !== undefined
  }

  #refresh (): void {
    const servers = this.#client?.topology?.description?.servers
    if (servers !== undefined) for (const server of servers.values()) learn(this.#state, server.type)
  }
}
