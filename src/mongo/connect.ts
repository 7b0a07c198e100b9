import { MongoClient, type Db, type MongoClientOptions } from 'mongodb'
import { ConnectError, InvalidOptionError, describe } from '../errors.js'
import { describeError } from './driver-errors.js'

interface ClientView {
  options?: { hosts?: Array<{ toString: () => string }>, credentials?: { username?: unknown, password?: unknown } }
  topology?: { description?: { servers?: Map<string, { error?: unknown }> } }
}

/** The hosts a Db's client talks to, `host:port,…` (from the parsed options: no credentials). */
export function hostsOf (db: Db): string {
  const hosts = (db as unknown as { client?: ClientView }).client?.options?.hosts
  return hosts === undefined || hosts.length === 0 ? 'unknown host' : hosts.map(h => h.toString()).join(',')
}

/** What the client's server monitoring last failed with, per server (`host:port: Name: message`; no credentials). */
function lastServerErrors (db: Db): string {
  const servers = (db as unknown as { client?: ClientView }).client?.topology?.description?.servers
  const out: string[] = []
  if (servers !== undefined) for (const [address, server] of servers) if (server.error != null) out.push(`${address}: ${describeError(server.error)}`)
  return out.join('; ')
}

const MASK = '***'

/** Where `url`'s user info stands, parsed or not: from its first `//` (or its start) to its last `@`. */
function userInfoOf (url: string): { from: number, to: number } | undefined {
  const at = url.lastIndexOf('@')
  if (at < 0) return undefined
  const slashes = url.indexOf('//')
  return { from: slashes >= 0 && slashes < at ? slashes + 2 : 0, to: at }
}

/**
 * `url` as a message may show it, parsed or not: its user info masked (`mongodb://***@host/`)
 * and its query, which may hold secrets too (`tlsCertificateKeyFilePassword`,
 * `authMechanismProperties`), left out (`?...`). The user info ends at the last `@`, not the
 * first: a password written with an unescaped `@` is what makes a url malformed to begin with.
 */
export function urlWithoutCredentials (url: string): string {
  const info = userInfoOf(url)
  const shown = info === undefined ? url : `${url.slice(0, info.from)}${MASK}${url.slice(info.to)}`
  const query = shown.indexOf('?')
  return query < 0 ? shown : `${shown.slice(0, query)}?...`
}

/** The user name and password written in `url`, as written and percent-decoded, parsed or not. */
export function credentialsIn (url: string): string[] {
  const info = userInfoOf(url)
  if (info === undefined) return []
  const userInfo = url.slice(info.from, info.to)
  const colon = userInfo.indexOf(':')
  const out: string[] = []
  for (const part of colon < 0 ? [userInfo] : [userInfo.slice(0, colon), userInfo.slice(colon + 1)]) {
    out.push(part)
    try { out.push(decodeURIComponent(part)) } catch { /* a malformed escape: as written only */ }
  }
  return out
}

/** The credentials a Db's client was made with (to keep them out of messages). */
function credentialsOf (db: Db): string[] {
  const c = (db as unknown as { client?: ClientView }).client?.options?.credentials
  return [c?.username, c?.password].filter((s): s is string => typeof s === 'string')
}

/**
 * `text` without credentials: the user info of any connection string in it masked, and each
 * of `secrets` (a user name, a password) masked wherever it stands as a whole word. Whole
 * words only, so a short user name does not garble the rest ("a" in "Database names"); the
 * driver echoes a user name alone ("Username contains unescaped characters bob/x").
 */
export function withoutCredentials (text: string, secrets: readonly string[] = []): string {
  let out = text.replace(/\/\/[^\s"'`]*@/g, `//${MASK}@`)
  for (const secret of [...new Set(secrets)].filter(s => s !== '').sort((a, b) => b.length - a.length)) {
    const escaped = secret.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
    out = out.replace(new RegExp(`(?<![A-Za-z0-9])${escaped}(?![A-Za-z0-9])`, 'g'), MASK)
  }
  return out
}

/**
 * The client and Db the plugin makes from `url`. The driver checks the url, `clientOptions`
 * and the database name as it builds them, and throws its own errors, which carry no code: a
 * bad one becomes an InvalidOptionError naming the option, with the driver's message and its
 * error as `cause`, credentials masked in both. Nothing is connected yet: nothing to close.
 */
export function clientFor (url: string, database: string | undefined, clientOptions: MongoClientOptions | undefined): { client: MongoClient, db: Db } {
  let client: MongoClient
  try {
    client = new MongoClient(url, clientOptions)
  } catch (err) {
    throw refusedByDriver(clientOptions !== undefined && parses(url) ? 'clientOptions' : `url ${describe(urlWithoutCredentials(url))}`, err, url, clientOptions)
  }
  try {
    return { client, db: client.db(database) }
  } catch (err) {
    throw refusedByDriver(database === undefined ? `url ${describe(urlWithoutCredentials(url))} (its database name)` : `database ${describe(database)}`, err, url, clientOptions)
  }
}

/** Whether the driver takes `url` alone (then a refusal of url + clientOptions is clientOptions'). */
function parses (url: string): boolean {
  try {
    return new MongoClient(url) instanceof MongoClient // parses the url, connects nothing
  } catch {
    return false
  }
}

function refusedByDriver (option: string, err: unknown, url: string, clientOptions: MongoClientOptions | undefined): InvalidOptionError {
  const auth = clientOptions?.auth
  const secrets = [...credentialsIn(url), ...[auth?.username, auth?.password].filter((s): s is string => typeof s === 'string')]
  const refused = new InvalidOptionError(`${option} refused by the MongoDB driver: ${withoutCredentials(describeError(err), secrets)}`)
  // The driver's error is the cause, its message and stack masked in place: a logger prints
  // them after ours (pino's error serializer joins the causes' messages). Nobody else holds it;
  // one that cannot be masked is left out.
  try {
    const e = err as Record<string, unknown>
    for (const key of ['message', 'stack']) {
      const text = e[key]
      if (typeof text === 'string' && withoutCredentials(text, secrets) !== text) e[key] = withoutCredentials(text, secrets)
    }
    Object.defineProperty(refused, 'cause', { value: err, writable: true, configurable: true }) // not enumerable, as Error's own
  } catch { /* a frozen error: no cause */ }
  return refused
}

/**
 * Pings the server, failing within `timeoutMs` with WRITE_BUFFER_CONNECT_FAILED naming the
 * hosts and the driver's cause — well before Fastify's plugin timeout, whose own message
 * ("forgotten to call 'done'") names neither. The client's own server selection timeout is
 * left as the user set it (it governs every later operation too): when the ping is still
 * waiting at `timeoutMs`, the cause is what the client's monitoring last saw of each server.
 */
export async function checkConnection (db: Db, timeoutMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => {
      const seen = lastServerErrors(db)
      reject(new Error(`no answer within connectTimeoutMs (${timeoutMs} ms)${seen === '' ? '' : `; last seen: ${seen}`}`))
    }, timeoutMs)
  })
  try {
    await Promise.race([db.command({ ping: 1 }), timeout])
  } catch (err) {
    const message = `fastify-write-buffer: cannot reach MongoDB at ${hostsOf(db)}: ${describeError(err)}`
    throw new ConnectError(withoutCredentials(message, credentialsOf(db)), err)
  } finally {
    clearTimeout(timer)
  }
}
