import net from 'node:net'
import type { Document } from 'mongodb'
import { type CommandInfo, MessageFramer, type MessageHeader, readCommand, readHeader, readReply, repliesMore, replyTo, withReply } from './wire-messages.js'

/**
 * A fault, shaped like MongoDB's `configureFailPoint` `failCommand` data
 * (specifications: source/transactions/tests/README.md, "failCommand").
 */
export interface FaultRule {
  /** command names this rule applies to, e.g. ['insert', 'update', 'delete'] */
  commands: string[]
  /** only commands on this collection (the command's first field's value) */
  collection?: string
  /** only connections whose handshake client.application.name is this (MongoClient appName) */
  appName?: string
  errorCode?: number
  errmsg?: string
  /** the reply's labels; without them, a retryable write failing with a retryable code gets RetryableWriteError, as from the server */
  errorLabels?: string[]
  closeConnection?: boolean
  blockConnection?: boolean
  blockTimeMS?: number
  /** the server runs the command, and this is added to its reply (as MongoDB's failCommand does) */
  writeConcernError?: { code: number, codeName?: string, errmsg?: string, errInfo?: Record<string, unknown> }
  /** how many matching commands it fires on (default: every one) */
  times?: number
  /** matching commands let through untouched before it starts firing */
  skip?: number
  /**
   * 'before' (default): the server never sees the command (nothing applied) — except blockConnection
   * without errorCode/closeConnection, which holds the request blockTimeMS and THEN delivers it to the
   * server, even if the client's connection closed meanwhile (a late attempt: the server applies it
   * late; the upstream socket stays until its reply, which is discarded if the client is gone).
   * 'after': the command goes to the server and is applied; then its reply is replaced by the error
   * (errorCode/labels) or the client connection is closed (closeConnection).
   * blockConnection always holds the request first, as the server blocks before running it.
   */
  when?: 'before' | 'after'
}

export interface FaultHandle { readonly fired: number, off (): void }

export interface SeenCommand { name: string, collection?: string, appName?: string, lsid?: unknown, txnNumber?: number, statements: number, at: number, faulted: boolean }

/** Holding matching commands, or their replies, for a while (a congested network, a stalled server). */
export interface HoldRule {
  /** which client messages start a hold (e.g. the bytes of an `update` command on one collection) */
  match: (message: Buffer) => boolean
  holdMs: number
  /** 'request': the command reaches the server late, even after the client gave up on it; 'reply': its answer does */
  direction: 'request' | 'reply'
}

/** A late request's connection to the server stays open for its reply at most this long after delivery. */
const LATE_REPLY_WAIT_MS = 30_000

const DEFAULT_ERRMSG = 'Failing command via \'failCommand\' failpoint'

/** The codes a retryable write is retried on (retryable-writes spec), labelled as the server labels them. */
const RETRYABLE_CODES = new Set([6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436])

const CODE_NAMES = new Map<number, string>([
  [1, 'InternalError'], [2, 'BadValue'], [6, 'HostUnreachable'], [7, 'HostNotFound'], [8, 'UnknownError'],
  [11, 'UserNotFound'], [13, 'Unauthorized'], [18, 'AuthenticationFailed'], [24, 'LockTimeout'],
  [43, 'CursorNotFound'], [46, 'LockBusy'], [50, 'MaxTimeMSExpired'], [59, 'CommandNotFound'],
  [64, 'WriteConcernFailed'], [79, 'UnknownReplWriteConcern'], [89, 'NetworkTimeout'], [91, 'ShutdownInProgress'],
  [100, 'UnsatisfiableWriteConcern'], [112, 'WriteConflict'], [189, 'PrimarySteppedDown'], [251, 'NoSuchTransaction'],
  [262, 'ExceededTimeLimit'], [9001, 'SocketException'], [10107, 'NotWritablePrimary'], [11000, 'DuplicateKey'],
  [11600, 'InterruptedAtShutdown'], [11602, 'InterruptedDueToReplStateChange'], [13435, 'NotPrimaryNoSecondaryOk'],
  [13436, 'NotPrimaryOrSecondary']
])

const HELLO_NAMES = new Set(['hello', 'isMaster', 'ismaster'])
const HEADER_BYTES = 16

/**
 * Every connection the proxy ends on the driver's side ends with a reset (RST): its own cuts,
 * as a dropped network path or a load balancer does, and the server's own closes (a server
 * stopped) passed on. A FIN opens a window in the driver (mongodb 7.9) that wedges its server
 * monitor for good when the server does not stream heartbeats (no `topologyVersion`:
 * FerretDB, DocumentDB): the socket is destroyed, its 'close' not yet emitted, and a heartbeat
 * started in that window writes to it and waits for a 'drain' that never comes. Every later
 * server selection then fails with the error that made the server Unknown (docs/outcomes.md, "Known
 * driver issues"; seen in the fault suite and in the restart test, under load). With a reset,
 * the driver learns of the end from the socket's error, in the same tick, and the fault tests
 * test the buffer rather than that wedge.
 */
function cut (socket: net.Socket): void {
  if (socket.destroyed) return
  socket.resetAndDestroy()
}

interface ActiveRule { rule: FaultRule, names: Set<string>, skip: number, left: number, fired: number }

/** What the proxy does to one reply: rewrite a hello's hosts, or the fault fired on its request. */
interface ReplyPlan { request: MessageHeader, hello: boolean, retryableWrite: boolean, fault: FaultRule | undefined, late: boolean }

/** One client message, waiting for its turn (held or blocked ones delay the ones behind them). */
interface Step { message: Buffer, info: CommandInfo | undefined, fault: FaultRule | undefined, due: number, late: boolean }

/**
 * In-process proxy between the driver and a server that reads the MongoDB wire protocol:
 * failCommand-like faults per command (`fail`), a log of the commands it carried (`seen`),
 * and network faults: cut every connection, drop a connection after N more client bytes
 * (mid-flush), stall traffic, hold matching commands or replies, or refuse connections
 * ("server down"). Bytes no rule touches pass unchanged. Hello replies naming the target are
 * rewritten to name the proxy, so a driver behind it discovers a replica set through it.
 * Loopback only; one target host.
 */
export class FaultProxy {
  readonly #server: net.Server
  readonly #links = new Set<Link>()
  readonly #rules: ActiveRule[] = []
  #seen: SeenCommand[] = []
  #stalled = false
  #down = false
  #dropAfter = -1
  #stalledWrites: Array<() => void> = []
  #hold: HoldRule | null = null
  cuts = 0
  /** commands (or replies) held so far */
  held = 0
  /** errors of connections to the server, by code (a diagnosis when a test fails: not asserted) */
  readonly upstreamErrors: Record<string, number> = {}
  /** connections refused while down, accepted, connected to the server, and closed by the server (a diagnosis: not asserted) */
  readonly connections = { refused: 0, accepted: 0, upstreamConnected: 0, closedByServer: 0 }

  private constructor (readonly targetHost: string, readonly targetPort: number) {
    this.#server = net.createServer(client => { this.#accept(client) })
  }

  /** Listens on 127.0.0.1, a free port, in front of `targetUri` (one host), or of `host`, `port`. */
  static async start (targetUri: string): Promise<FaultProxy>
  static async start (targetHost: string, targetPort: number): Promise<FaultProxy>
  static async start (target: string, targetPort?: number): Promise<FaultProxy> {
    const hostPort = targetPort === undefined ? hostPortOf(target) : { host: target, port: targetPort }
    if (hostPort === undefined) throw new TypeError(`FaultProxy needs a mongodb:// URI with one host, got ${JSON.stringify(target)}`)
    const proxy = new FaultProxy(hostPort.host, hostPort.port)
    proxy.#server.on('error', () => {}) // a listener error after start has no one to tell
    await new Promise<void>((resolve, reject) => {
      proxy.#server.once('error', reject)
      proxy.#server.listen(0, '127.0.0.1', () => { proxy.#server.off('error', reject); resolve() })
    })
    return proxy
  }

  get port (): number { return (this.#server.address() as net.AddressInfo).port }

  /**
   * The URI to give a MongoClient: `mongodb://127.0.0.1:<port>/`, through which the driver
   * discovers the target's topology (a replica set included). Given an `original` URI, that URI
   * with the proxy as its host, its query options kept, and directConnection=true.
   */
  uri (original?: string): string {
    if (original === undefined) return `mongodb://127.0.0.1:${this.port}/`
    const u = new URL(original)
    u.host = `127.0.0.1:${this.port}`
    u.searchParams.set('directConnection', 'true')
    return u.toString()
  }

  /** Fires `rule` on the commands it matches, from now on, until off() or clear(). */
  fail (rule: FaultRule): FaultHandle {
    validate(rule)
    const active: ActiveRule = { rule: { ...rule }, names: new Set(rule.commands), skip: rule.skip ?? 0, left: rule.times ?? Infinity, fired: 0 }
    this.#rules.push(active)
    const rules = this.#rules
    return {
      get fired () { return active.fired },
      off () {
        const i = rules.indexOf(active)
        if (i >= 0) rules.splice(i, 1)
      },
    }
  }

  /** Every command forwarded or faulted so far, in the order they arrived. */
  seen (): SeenCommand[] { return [...this.#seen] }

  /** Drops every rule and the log. */
  clear (): void {
    this.#rules.length = 0
    this.#seen = []
  }

  /** Holds the next matching command (or its reply); `release()` cancels a hold not yet used. */
  holdMatching (rule: HoldRule): void { this.#hold = rule }
  release (): void { this.#hold = null }

  /** Destroys every open connection (both directions). */
  cutAll (): void {
    for (const link of this.#links) {
      if (link.clientGone) continue
      this.cuts++
      link.cut()
    }
  }

  /** The next connection to send more than `bytes` client bytes is cut in the middle. */
  dropAfter (bytes: number): void { this.#dropAfter = bytes }

  /** Holds all traffic (a stalled server) until resume(). */
  stall (): void { this.#stalled = true }

  resume (): void {
    this.#stalled = false
    const writes = this.#stalledWrites
    this.#stalledWrites = []
    for (const write of writes) write()
  }

  /** Server "down": cut everything and refuse new connections until up(). */
  down (): void { this.#down = true; this.cutAll() }
  up (): void { this.#down = false }

  /** Closes the listener and every connection, late deliveries and their timers included. */
  async close (): Promise<void> {
    this.#down = true
    this.#hold = null
    this.#stalledWrites = []
    for (const link of this.#links) link.destroy()
    this.#links.clear()
    await new Promise<void>(resolve => this.#server.close(() => resolve()))
  }

  #accept (client: net.Socket): void {
    if (this.#down) { this.connections.refused++; client.on('error', () => {}); cut(client); return }
    this.connections.accepted++
    const link = new Link(client, this, {
      decide: (info, appName) => this.#decide(info, appName),
      takeHold: message => this.#takeHold(message),
      takeDrop: bytes => this.#takeDrop(bytes),
      rewriteHello: reply => this.#rewriteHello(reply),
      send: (to, bytes) => {
        if (this.#stalled) this.#stalledWrites.push(() => { if (!to.destroyed) to.write(bytes) })
        else if (!to.destroyed) to.write(bytes)
      },
      ended: () => { this.#links.delete(link) },
    })
    this.#links.add(link)
  }

  /** The rule that fires on this command, if any (rules in the order they were added), logged either way. */
  #decide (info: CommandInfo, appName: string | undefined): FaultRule | undefined {
    let firing: ActiveRule | undefined
    for (const active of this.#rules) {
      const { rule } = active
      if (active.left <= 0 || !active.names.has(info.name)) continue
      if (rule.collection !== undefined && rule.collection !== info.collection) continue
      if (rule.appName !== undefined && rule.appName !== appName) continue
      if (active.skip > 0) { active.skip--; continue }
      firing = active
      break
    }
    if (firing !== undefined) { firing.left--; firing.fired++ }
    const entry: SeenCommand = { name: info.name, statements: info.statements, at: Date.now(), faulted: firing !== undefined }
    if (info.collection !== undefined) entry.collection = info.collection
    if (appName !== undefined) entry.appName = appName
    if (info.lsid !== undefined) entry.lsid = info.lsid
    if (info.txnNumber !== undefined) entry.txnNumber = info.txnNumber
    this.#seen.push(entry)
    return firing?.rule
  }

  #takeHold (message: Buffer): HoldRule | undefined {
    const rule = this.#hold
    if (rule === null || !rule.match(message)) return undefined
    this.held++
    this.#hold = null // one command: the ones after it (a retry, a later write) pass
    return rule
  }

  /** With a drop armed, how many of the next `bytes` client bytes go before the cut (undefined: no cut now). */
  #takeDrop (bytes: number): number | undefined {
    if (this.#dropAfter < 0) return undefined
    this.#dropAfter -= bytes
    if (this.#dropAfter >= 0) return undefined
    const keep = Math.max(0, bytes + this.#dropAfter)
    this.#dropAfter = -1
    this.cuts++
    return keep
  }

  /** A hello reply with every host entry naming the target naming the proxy instead (unchanged bytes if none does). */
  #rewriteHello (reply: Buffer): Buffer {
    const doc = readReply(reply)
    if (doc === undefined) return reply
    const proxy = `127.0.0.1:${this.port}`
    let changed = false
    const map = (v: unknown): unknown => {
      if (typeof v !== 'string' || !this.#isTarget(v)) return v
      changed = true
      return proxy
    }
    for (const key of ['hosts', 'passives', 'arbiters']) if (Array.isArray(doc[key])) doc[key] = (doc[key] as unknown[]).map(map)
    for (const key of ['me', 'primary']) if (key in doc) doc[key] = map(doc[key])
    return changed ? withReply(reply, doc) : reply
  }

  #isTarget (hostPort: string): boolean {
    const i = hostPort.lastIndexOf(':')
    const host = (i < 0 ? hostPort : hostPort.slice(0, i)).replace(/^\[|\]$/g, '').toLowerCase()
    const port = i < 0 ? 27017 : Number(hostPort.slice(i + 1))
    return port === this.targetPort && sameHost(host, this.targetHost.replace(/^\[|\]$/g, '').toLowerCase())
  }
}

const LOOPBACK = new Set(['localhost', '127.0.0.1', '::1'])
const sameHost = (a: string, b: string): boolean => a === b || (LOOPBACK.has(a) && LOOPBACK.has(b))

function validate (rule: FaultRule): void {
  if (!Array.isArray(rule.commands) || rule.commands.length === 0) throw new TypeError(`FaultRule.commands must name at least one command, got ${JSON.stringify(rule.commands)}`)
  if (rule.when !== undefined && rule.when !== 'before' && rule.when !== 'after') throw new TypeError(`FaultRule.when must be 'before' or 'after', got ${JSON.stringify(rule.when)}`)
  if (rule.blockConnection === true && !(typeof rule.blockTimeMS === 'number' && rule.blockTimeMS >= 0)) throw new TypeError(`FaultRule.blockConnection needs blockTimeMS >= 0, got ${JSON.stringify(rule.blockTimeMS)}`)
  for (const key of ['times', 'skip'] as const) {
    const n = rule[key]
    if (n !== undefined && !(Number.isInteger(n) && n >= 0)) throw new TypeError(`FaultRule.${key} must be an integer >= 0, got ${JSON.stringify(n)}`)
  }
  if (rule.errorCode === undefined && rule.closeConnection !== true && rule.blockConnection !== true && rule.writeConcernError === undefined) {
    throw new TypeError(`FaultRule does nothing: give errorCode, closeConnection, blockConnection or writeConcernError, got ${JSON.stringify(rule)}`)
  }
}

/** What the proxy lends each connection: its rules, holds, drops and stall, and its registry. */
interface Switchboard {
  decide (info: CommandInfo, appName: string | undefined): FaultRule | undefined
  takeHold (message: Buffer): HoldRule | undefined
  takeDrop (bytes: number): number | undefined
  rewriteHello (reply: Buffer): Buffer
  /** writes, or queues the write while the proxy is stalled */
  send (to: net.Socket, bytes: Buffer): void
  ended (): void
}

/** One client connection and its connection to the server. */
class Link {
  readonly #client: net.Socket
  readonly #upstream: net.Socket
  readonly #proxy: FaultProxy
  readonly #board: Switchboard
  readonly #requests = new MessageFramer()
  readonly #replies = new MessageFramer()
  readonly #steps: Step[] = []
  /** replies expected, by the requestID they answer */
  readonly #plans = new Map<number, ReplyPlan>()
  readonly #timers = new Set<NodeJS.Timeout>()
  #stepTimer: NodeJS.Timeout | undefined
  /** with the client gone: a cap on the wait for a late request's reply */
  #lingerTimer: NodeJS.Timeout | undefined
  #appName: string | undefined
  #requestsHeldUntil = 0
  #repliesHeldUntil = 0
  #upstreamFailed = false
  clientGone = false

  constructor (client: net.Socket, proxy: FaultProxy, board: Switchboard) {
    this.#client = client
    this.#proxy = proxy
    this.#board = board
    this.#upstream = net.connect(proxy.targetPort, proxy.targetHost, () => { proxy.connections.upstreamConnected++ })
    client.on('error', () => { this.#clientClosed() }).on('close', () => { this.#clientClosed() })
    client.on('data', chunk => { this.#fromClient(chunk) })
    this.#upstream.on('error', err => {
      // why the proxy could not reach the server (ECONNREFUSED, EADDRNOTAVAIL…): printed by the fault suite's report
      const code = (err as NodeJS.ErrnoException).code ?? err.name
      proxy.upstreamErrors[code] = (proxy.upstreamErrors[code] ?? 0) + 1
      this.#upstreamFailed = true
    }).on('close', () => {
      if (!this.clientGone && !this.#upstreamFailed) proxy.connections.closedByServer++
      this.destroy()
    })
    this.#upstream.on('data', chunk => {
      for (const reply of this.#replies.push(chunk)) this.#fromServer(reply)
    })
  }

  /** Ends both sides now (the client's with a reset). */
  cut (): void { this.destroy() }

  destroy (): void {
    this.clientGone = true
    cut(this.#client)
    this.#upstream.destroy()
    clearTimeout(this.#stepTimer)
    clearTimeout(this.#lingerTimer)
    for (const t of this.#timers) clearTimeout(t)
    this.#timers.clear()
    this.#steps.length = 0
    this.#plans.clear()
    this.#board.ended()
  }

  #fromClient (chunk: Buffer): void {
    const keep = this.#board.takeDrop(chunk.length)
    if (keep === undefined) {
      for (const message of this.#requests.push(chunk)) this.#request(message)
      return
    }
    // forward a part, then cut: the server sees a truncated command
    for (const message of this.#requests.push(chunk.subarray(0, keep))) this.#request(message)
    const partial = this.#requests.rest()
    if (this.#steps.length === 0 && partial.length > 0 && !this.#upstream.destroyed) this.#upstream.write(partial)
    this.cut()
  }

  #request (message: Buffer): void {
    const info = readCommand(message)
    if (info?.appName !== undefined) this.#appName ??= info.appName
    const now = Date.now()
    const hold = this.#board.takeHold(message)
    if (hold?.direction === 'request') this.#requestsHeldUntil = now + hold.holdMs
    if (hold?.direction === 'reply') this.#repliesHeldUntil = now + hold.holdMs
    const fault = info === undefined ? undefined : this.#board.decide(info, this.#appName)
    const blockedUntil = fault?.blockConnection === true ? now + (fault.blockTimeMS ?? 0) : 0
    const due = Math.max(this.#requestsHeldUntil, blockedUntil)
    this.#steps.push({ message, info, fault, due, late: due > now })
    this.#pump()
  }

  /** Runs the steps that are due, in order; the first one not due yet waits, and the rest behind it. */
  #pump (): void {
    clearTimeout(this.#stepTimer)
    this.#stepTimer = undefined
    for (let step = this.#steps[0]; step !== undefined; step = this.#steps[0]) {
      const wait = step.due - Date.now()
      if (wait > 0) {
        this.#stepTimer = setTimeout(() => { this.#pump() }, wait).unref()
        return
      }
      this.#steps.shift()
      this.#run(step)
      if (this.#upstream.destroyed) return
    }
    if (this.clientGone) this.#finishWhenAnswered()
  }

  #run ({ message, info, fault, late }: Step): void {
    if (message.length < HEADER_BYTES) { this.#board.send(this.#upstream, message); return } // not a message: passed on
    const request = readHeader(message)
    const moreToCome = info?.moreToCome === true
    const after = fault?.when === 'after'
    if (fault !== undefined && info !== undefined && !after) {
      if (fault.closeConnection === true) { this.#proxy.cuts++; this.cut(); return }
      if (fault.errorCode !== undefined) {
        // an unacknowledged write expects no reply: it is dropped
        if (!moreToCome && !this.clientGone) this.#client.write(replyTo(request, errorReply(fault, fault.errorCode, info)))
        return
      }
    }
    if (this.#upstream.destroyed) return
    if (!moreToCome) {
      const hello = info !== undefined && HELLO_NAMES.has(info.name)
      this.#plans.set(request.requestID, { request, hello, retryableWrite: info?.retryableWrite === true, fault, late })
    }
    this.#board.send(this.#upstream, message)
    if (moreToCome && after && fault?.closeConnection === true) { this.#proxy.cuts++; this.cut() }
  }

  #fromServer (reply: Buffer): void {
    const plan = reply.length >= HEADER_BYTES ? this.#plans.get(readHeader(reply).responseTo) : undefined
    let out = reply
    if (plan !== undefined) {
      const { requestID, responseTo } = readHeader(reply)
      this.#plans.delete(responseTo)
      // an exhaust stream (streaming hello): its next reply answers this one
      if (repliesMore(reply)) this.#plans.set(requestID, { ...plan, fault: undefined, late: false })
      const fault = plan.fault
      if (fault !== undefined && !this.clientGone && fault.when === 'after' && fault.closeConnection === true) { this.#proxy.cuts++; this.cut(); return }
      try {
        if (plan.hello) out = this.#board.rewriteHello(out)
        if (fault !== undefined && fault.when === 'after' && fault.errorCode !== undefined) {
          out = replyTo(plan.request, errorReply(fault, fault.errorCode, undefined))
        } else if (fault?.writeConcernError !== undefined) {
          out = withWriteConcernError(out, fault, plan.retryableWrite)
        }
      } catch {
        // a reply this reader does not understand goes on as the server sent it
        out = reply
      }
    }
    if (this.clientGone) {
      // a late attempt's answer, with no one left to read it
      this.#finishWhenAnswered()
      return
    }
    const wait = this.#repliesHeldUntil - Date.now()
    if (wait <= 0) { this.#board.send(this.#client, out); return }
    const timer = setTimeout(() => {
      this.#timers.delete(timer)
      if (!this.#client.destroyed) this.#client.write(out)
    }, wait).unref()
    this.#timers.add(timer)
  }

  #clientClosed (): void {
    if (this.clientGone) return
    this.clientGone = true
    this.#finishWhenAnswered()
  }

  /**
   * With the client gone, the server side ends as soon as no late request is queued or unanswered:
   * a held or blocked request still reaches the server (as in a congested network) and is answered.
   */
  #finishWhenAnswered (): void {
    const waiting = this.#steps.length > 0 || [...this.#plans.values()].some(p => p.late)
    if (!waiting) { this.destroy(); return }
    if (this.#lingerTimer !== undefined) return
    const lastDue = Math.max(0, ...this.#steps.map(s => s.due - Date.now()))
    this.#lingerTimer = setTimeout(() => { this.destroy() }, lastDue + LATE_REPLY_WAIT_MS).unref()
  }
}

/** The reply the server gives a command failCommand fails: `{ ok: 0, errmsg, code, codeName, errorLabels }`. */
function errorReply (fault: FaultRule, code: number, info: CommandInfo | undefined): Document {
  const doc: Document = { ok: 0, errmsg: fault.errmsg ?? DEFAULT_ERRMSG, code }
  const codeName = CODE_NAMES.get(code)
  if (codeName !== undefined) doc.codeName = codeName
  const labels = fault.errorLabels ?? (info?.retryableWrite === true && RETRYABLE_CODES.has(code) ? ['RetryableWriteError'] : undefined)
  if (labels !== undefined) doc.errorLabels = labels
  return doc
}

/** The server's reply with the rule's writeConcernError added (and its labels), when the command itself succeeded. */
function withWriteConcernError (reply: Buffer, fault: FaultRule, retryableWrite: boolean): Buffer {
  const doc = readReply(reply)
  const wce = fault.writeConcernError
  if (doc === undefined || wce === undefined || Number(doc.ok) !== 1) return reply
  const error: Document = { code: wce.code }
  const codeName = wce.codeName ?? CODE_NAMES.get(wce.code)
  if (codeName !== undefined) error.codeName = codeName
  error.errmsg = wce.errmsg ?? DEFAULT_ERRMSG
  if (wce.errInfo !== undefined) error.errInfo = wce.errInfo
  doc.writeConcernError = error
  const labels = fault.errorLabels ?? (retryableWrite && RETRYABLE_CODES.has(wce.code) ? ['RetryableWriteError'] : undefined)
  if (labels !== undefined) doc.errorLabels = labels
  return withReply(reply, doc)
}

export function hostPortOf (uri: string): { host: string, port: number } | undefined {
  try {
    const u = new URL(uri)
    if (u.protocol !== 'mongodb:' || u.host.includes(',')) return undefined
    return { host: u.hostname, port: Number(u.port || 27017) }
  } catch {
    return undefined
  }
}
