import type { Db } from 'mongodb'
import { ConnectError } from '../errors.js'
import { describeError } from './driver-errors.js'

interface ClientView {
  options?: { hosts?: Array<{ toString: () => string }> }
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
    throw new ConnectError(`fastify-write-buffer: cannot reach MongoDB at ${hostsOf(db)}: ${describeError(err)}`, err)
  } finally {
    clearTimeout(timer)
  }
}
