import type { Db } from 'mongodb'

interface ClientView {
  options?: { retryWrites?: boolean }
  topology?: { description?: { servers?: Map<string, ServerView> } }
  on?: (event: 'serverDescriptionChanged', listener: (ev: { newDescription: ServerView }) => void) => unknown
}

/** What the buffer reads of a driver ServerDescription (from the server's `hello`). */
interface ServerView { type?: string, maxWriteBatchSize?: number | null }

/** What one client's server monitoring has told us; shared by every buffer on that client. */
interface ClientState {
  known: boolean | undefined
  /** the smallest `maxWriteBatchSize` a server announced (hello): more writes make the driver split a command */
  maxWriteBatchSize: number | undefined
  /** the bound a server taught by refusing a command for too many writes (DriverRetries#learnMaxWriteBatchSize): hello may overstate it */
  learned: number | undefined
}

/**
 * One listener per client, however many buffers share it: a listener per buffer would never
 * be removed (the client outlives a closed buffer) and would trip Node's MaxListeners warning
 * at the eleventh buffer.
 */
const states = new WeakMap<object, ClientState>()

function stateOf (client: ClientView): ClientState {
  let state = states.get(client)
  if (state === undefined) {
    const created: ClientState = state = { known: undefined, maxWriteBatchSize: undefined, learned: undefined }
    states.set(client, created)
    client.on?.('serverDescriptionChanged', ev => { learn(created, ev.newDescription) })
  }
  return state
}

function learn (state: ClientState, server: ServerView): void {
  const type = server.type
  const limit = server.maxWriteBatchSize
  if (typeof limit === 'number' && limit > 0 && (state.maxWriteBatchSize === undefined || limit < state.maxWriteBatchSize)) {
    state.maxWriteBatchSize = limit
  }
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
  /** the servers map last read (see #refresh) */
  #seen: Map<string, ServerView> | undefined

  constructor (db: Db) {
    const client = this.#client = (db as unknown as { client?: ClientView }).client
    this.#retryWrites = client?.options?.retryWrites !== false
    this.#state = client === undefined ? { known: undefined, maxWriteBatchSize: undefined, learned: undefined } : stateOf(client)
  }

  mayHaveRetried (): boolean {
    this.#refresh()
    return this.#retryWrites && this.#state.known === true
  }

  /**
   * Whether the driver may send a write again on its own (its retryable writes) on this
   * deployment: retryWrites is on and the deployment is not known to be a standalone server.
   * True until a server is known: a command sent then may reach a replica set.
   */
  mayRetry (): boolean {
    this.#refresh()
    return this.#retryWrites && this.#state.known !== false
  }

  /** Whether the deployment is one standalone server: its driver never re-sends a command on its own. */
  standalone (): boolean {
    this.#refresh()
    return this.#state.known === false
  }

  /**
   * The most writes one command may carry on this deployment: the smallest `maxWriteBatchSize`
   * its servers announced (100,000 on MongoDB; DocumentDB's says 100,000 too), or the bound a
   * server taught by refusing more (25,000 on DocumentDB: learnMaxWriteBatchSize), whichever is
   * smaller; undefined before either. A bulkWrite with more is split by the driver into
   * several commands.
   */
  maxWriteBatchSize (): number | undefined {
    this.#refresh()
    const { maxWriteBatchSize: hello, learned } = this.#state
    return learned === undefined ? hello : hello === undefined ? learned : Math.min(hello, learned)
  }

  /** A server refused a command for holding more than `bound` writes: every buffer on this client keeps to it from now on. */
  learnMaxWriteBatchSize (bound: number): void {
    if (this.#state.learned === undefined || bound < this.#state.learned) this.#state.learned = bound
  }

  /** Whether a server was ever reached: before that, no command can have been sent. */
  everConnected (): boolean {
    this.#refresh()
    return this.#state.known !== undefined
  }

  /**
   * Reads the client's servers. The driver replaces its topology description (and the map in
   * it) on every change, so a map already read has nothing new: asked once per pump, this
   * costs a comparison, not a walk over the servers.
   */
  #refresh (): void {
    const servers = this.#client?.topology?.description?.servers
    if (servers === undefined || servers === this.#seen) return
    this.#seen = servers
    for (const server of servers.values()) learn(this.#state, server)
  }
}
