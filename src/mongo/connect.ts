import { MongoClient, type Db, type MongoClientOptions } from 'mongodb'
import { ConnectError, InvalidOptionError, describe } from '../errors.js'
import { credentialsIn, urlWithoutCredentials, withoutCredentials } from './credentials.js'
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

/** The credentials a Db's client was made with (to keep them out of messages). */
function credentialsOf (db: Db): string[] {
  const c = (db as unknown as { client?: ClientView }).client?.options?.credentials
  return [c?.username, c?.password].filter((s): s is string => typeof s === 'string')
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
  // The driver's error is the cause, its message and stack masked in place: a logger prints
  // them after ours (pino's error serializer joins the causes' messages). Nobody else holds it;
  // one that cannot be masked is left out.
  let cause: unknown = err
  try {
    const e = err as Record<string, unknown>
    for (const key of ['message', 'stack']) {
      const text = e[key]
      if (typeof text === 'string' && withoutCredentials(text, secrets) !== text) e[key] = withoutCredentials(text, secrets)
    }
  } catch { cause = undefined } // a frozen error: no cause
  return new InvalidOptionError(`${option} refused by the MongoDB driver: ${withoutCredentials(describeError(err), secrets)}`, cause)
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
