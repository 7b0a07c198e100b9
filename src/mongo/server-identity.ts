import { realClock, type Clock } from '../clock.js'
import type { Db, Document } from 'mongodb'

/**
 * Whether the server is MongoDB itself, from its `buildInfo`: the only server whose whole-
 * command refusals (`ok: 0`) this library trusts to mean "nothing applied" for the codes
 * mongo/server-codes.ts lists as raised before execution. A compatible server (FerretDB,
 * DocumentDB, a cloud API) speaks the protocol but raises codes at its own moments.
 *
 * MongoDB's buildInfo names the commit it was built from (`gitVersion`, 40 hex digits) and its
 * `allocator`; FerretDB adds `ferretdbVersion` / `ferretdbFeatures` and answers
 * `gitVersion: "unknown"`. Anything that does not look like MongoDB counts as not MongoDB:
 * the cost of a wrong "no" is an honest `unknown`, of a wrong "yes" a lie.
 */
export function looksLikeMongoDB (buildInfo: Document): boolean {
  for (const key in buildInfo) if (key.toLowerCase().startsWith('ferretdb')) return false
  return typeof buildInfo.gitVersion === 'string' && /^[0-9a-f]{40}$/.test(buildInfo.gitVersion) &&
    typeof buildInfo.allocator === 'string' && typeof buildInfo.version === 'string'
}

/**
 * Whether the server's write errors name the statements that failed, by index, for updates and
 * deletes too: MongoDB's do, and FerretDB 2 on DocumentDB's (measured: a failing statement is
 * reported at its index, the others run). FerretDB 1.x stops an update command at its failing
 * statement and reports it as statement 0; an unknown server is not trusted either
 * (isolate.ts#indexesProven).
 */
export function reportsStatements (buildInfo: Document): boolean {
  if (looksLikeMongoDB(buildInfo)) return true
  const v2 = (buildInfo.ferretdb as { version?: unknown } | undefined)?.version
  return typeof v2 === 'string' && /^v?([2-9]|\d{2,})\./.test(v2)
}

/**
 * Hosts the drivers themselves know are not MongoDB (node-mongodb-native src/utils.ts
 * COSMOS_DB_CHECK / DOCUMENT_DB_CHECK): their buildInfo may imitate MongoDB's.
 */
const NON_GENUINE_HOST = /\.cosmos\.azure\.com$|\.docdb(-elastic)?\.amazonaws\.com$/i

/** Whether any of the client's seed hosts is a known MongoDB-compatible cloud service. */
export function nonGenuineHost (hosts: ReadonlyArray<{ host?: string } | string> | undefined): boolean {
  if (hosts === undefined) return false
  for (const h of hosts) {
    const name = typeof h === 'string' ? h.replace(/:\d+$/, '') : h.host
    if (name !== undefined && NON_GENUINE_HOST.test(name)) return true
  }
  return false
}

/**
 * Asked once per buffer: after a server refused a whole command (so it answers), or at the first
 * batch on a deployment where the driver may resend a write on its own (wire.ts).
 */
export class ServerIdentity {
  #known: Verdict | undefined
  #asking: Promise<Verdict> | null = null
  /** clock time before which a buildInfo that could not be sent is not sent again */
  #askAgainAt = 0

  constructor (readonly db: Pick<Db, 'command'> & { client?: unknown }, readonly clock: Clock = realClock) {}

  /** MongoDB or not, once known (a buildInfo answered, or a host known not to be); undefined before. */
  knownMongoDB (): boolean | undefined { return this.#known?.mongo }

  /** MongoDB or not; a failed buildInfo answers false (not proven): refused, for good; unsent, asked again after ASK_AGAIN_MS. */
  async isMongoDB (): Promise<boolean> { return (await this.#verdict()).mongo }

  /** Whether its write errors name their statements by index (reportsStatements); false when not proven. */
  async reportsStatements (): Promise<boolean> { return (await this.#verdict()).statements }

  #verdict (): Promise<Verdict> {
    if (this.#known !== undefined) return Promise.resolve(this.#known)
    if (typeof this.db.command !== 'function') return Promise.resolve(UNPROVEN)
    const hosts = (this.db as { client?: { options?: { hosts?: Array<{ host?: string }> } } }).client?.options?.hosts
    if (nonGenuineHost(hosts)) return Promise.resolve(this.#known = UNPROVEN)
    if (this.#asking === null && this.clock.now() < this.#askAgainAt) return Promise.resolve(UNPROVEN)
    this.#asking ??= this.db.command({ buildInfo: 1 }).then(
      info => (this.#known = { mongo: looksLikeMongoDB(info), statements: reportsStatements(info) }),
      (err: unknown) => {
        // an answer refusing buildInfo (Atlas's Stable API strict mode: APIStrictError) is final:
        // not proven MongoDB, for good; a failure to reach the server is asked again, not before
        // ASK_AGAIN_MS (wire.ts asks at every batch while it does not know)
        if (typeof (err as { code?: unknown } | null)?.code === 'number') this.#known = UNPROVEN
        else this.#askAgainAt = this.clock.now() + ASK_AGAIN_MS
        return UNPROVEN
      }
    ).finally(() => { this.#asking = null })
    return this.#asking
  }
}

interface Verdict { mongo: boolean, statements: boolean }
/** How long after a buildInfo that could not reach the server it is asked again. */
const ASK_AGAIN_MS = 5_000
const UNPROVEN: Verdict = Object.freeze({ mongo: false, statements: false })
