// The overload suite's proxy, in a worker thread of its own (bench/overload-proxy.mjs starts it
// and talks to it): a TCP proxy in front of the real server that reads the MongoDB wire protocol
// (OP_MSG, as test/support/wire-messages.ts does, in plain JS: the bench runs without a
// TypeScript loader) and applies one policy to the write commands (insert / update / delete) on
// the collections whose names start with a prefix. Every other message, and every byte from the server, passes unchanged.
//   pass:   write commands go straight through (only counted)
//   queue:  one worker serves the write commands one at a time, in arrival order across every
//           connection: each is held for (its writes × serviceUs), then sent to the server, and
//           the next starts when the server's reply is back. A command's round trip is then the
//           service of every command ahead of it plus its own: it grows with the commands the
//           server holds (a queue with a fixed service time per write and one worker).
//   bucket: a token bucket of ratePerS writes a second, holding at most `burst` tokens: a command
//           takes one token per write and is let through when the bucket holds that many (a
//           command of more writes than `burst` never passes: the suite's burst is the buffer's
//           largest batch); otherwise it is answered at once, unsent, with error 462 IngressRequestRateLimitExceeded
//           and the labels SystemOverloadedError + RetryableError, as MongoDB 8.2's ingress rate
//           limiter refuses a request before running it (nothing applied).
import net from 'node:net'
import { parentPort, workerData } from 'node:worker_threads'
import { BSON } from 'mongodb'

const OP_MSG = 2013
const HEADER_BYTES = 16
const CHECKSUM_PRESENT = 1
const WRITE_COMMANDS = new Set(['insert', 'update', 'delete'])
const STATEMENT_FIELDS = new Set(['documents', 'updates', 'deletes'])

const { targetHost, targetPort } = workerData
let policy = { mode: 'pass', prefix: '\0' }
/** queue mode: the jobs waiting for the worker, and its clock (ms: when it is free, as if no timer were late) */
const jobs = []
let serving = false
let clock = 0
/** bucket mode */
let tokens = 0
let refilledAt = 0
const fresh = () => ({ commands: 0, statements: 0, accepted: 0, acceptedStatements: 0, refused: 0, refusedStatements: 0, maxQueued: 0, connections: 0 })
let counts = fresh()
const links = new Set()

/** Cuts a byte stream into whole messages. */
class Framer {
  #pending = Buffer.alloc(0)
  push (chunk) {
    let buf = this.#pending.length === 0 ? chunk : Buffer.concat([this.#pending, chunk])
    const out = []
    while (buf.length >= 4) {
      const length = buf.readInt32LE(0)
      if (length < HEADER_BYTES) { out.push(buf); buf = Buffer.alloc(0); break } // not a message: pass it on
      if (buf.length < length) break
      out.push(buf.subarray(0, length))
      buf = buf.subarray(length)
    }
    this.#pending = buf
    return out
  }
}

function valueSize (buf, type, at) {
  switch (type) {
    case 0x01: case 0x09: case 0x11: case 0x12: return 8
    case 0x02: case 0x0D: case 0x0E: return 4 + buf.readInt32LE(at)
    case 0x03: case 0x04: case 0x0F: return buf.readInt32LE(at)
    case 0x05: return 5 + buf.readInt32LE(at)
    case 0x06: case 0x0A: case 0x7F: case 0xFF: return 0
    case 0x07: return 12
    case 0x08: return 1
    case 0x0B: { const p = buf.indexOf(0, at); return buf.indexOf(0, p + 1) + 1 - at }
    case 0x0C: return 4 + buf.readInt32LE(at) + 12
    case 0x10: return 4
    case 0x13: return 16
    default: throw new RangeError(`BSON type 0x${type.toString(16)} unknown`)
  }
}

/** Calls fn(type, name, valueStart, valueEnd) for each top-level element of the document at `docAt`. */
function eachElement (buf, docAt, fn) {
  const end = docAt + buf.readInt32LE(docAt) - 1
  for (let at = docAt + 4; at < end;) {
    const type = buf[at]
    const nameEnd = buf.indexOf(0, at + 1)
    const start = nameEnd + 1
    const stop = start + valueSize(buf, type, start)
    if (fn(type, buf.toString('latin1', at + 1, nameEnd), start, stop) === false) return
    at = stop
  }
}

/** { name, collection, statements } of an OP_MSG command (statements: of a write command); undefined for anything else. */
function commandOf (msg) {
  try {
    if (msg.readInt32LE(12) !== OP_MSG) return undefined
    const flags = msg.readUInt32LE(16)
    const end = (flags & CHECKSUM_PRESENT) !== 0 ? msg.length - 4 : msg.length
    let info
    let statements = 0
    for (let at = 20; at < end;) {
      const kind = msg[at]
      const size = msg.readInt32LE(at + 1)
      if (kind === 0) {
        eachElement(msg, at + 1, (type, name, start, stop) => {
          if (info === undefined) {
            info = { name, collection: type === 0x02 ? msg.toString('utf8', start + 4, stop - 1) : undefined }
            if (!WRITE_COMMANDS.has(name)) return false
          } else if (type === 0x04 && STATEMENT_FIELDS.has(name)) {
            eachElement(msg, start, () => { statements++ })
          }
        })
      } else if (kind === 1) {
        const idEnd = msg.indexOf(0, at + 5)
        if (STATEMENT_FIELDS.has(msg.toString('latin1', at + 5, idEnd))) {
          for (let doc = idEnd + 1; doc < at + 1 + size; doc += msg.readInt32LE(doc)) statements++
        }
      } else {
        return undefined
      }
      at += 1 + size
    }
    if (info === undefined) return undefined
    info.statements = statements
    return info
  } catch {
    return undefined
  }
}

/** The body of an OP_MSG reply (its kind-0 section), or undefined. */
function replyBody (reply) {
  if (reply.readInt32LE(12) !== OP_MSG) return undefined
  const flags = reply.readUInt32LE(16)
  const end = (flags & CHECKSUM_PRESENT) !== 0 ? reply.length - 4 : reply.length
  for (let at = 20; at < end; at += 1 + reply.readInt32LE(at + 1)) {
    if (reply[at] === 0) return BSON.deserialize(reply.subarray(at + 1, at + 1 + reply.readInt32LE(at + 1)), { promoteValues: false })
  }
  return undefined
}

/**
 * A buildInfo reply as MongoDB 8.2's (version, a commit's gitVersion, an allocator, no FerretDB
 * fields): the library trusts a refusal code to mean "nothing applied" only from MongoDB itself
 * (src/mongo/server-identity.ts), and the bucket plays MongoDB 8.2's ingress limiter.
 */
function asMongoDB82 (reply) {
  const doc = replyBody(reply)
  if (doc === undefined) return reply
  for (const key of Object.keys(doc)) if (key.toLowerCase().startsWith('ferretdb')) delete doc[key]
  Object.assign(doc, { version: '8.2.0', gitVersion: '0123456789abcdef0123456789abcdef01234567', allocator: 'tcmalloc-google', versionArray: [8, 2, 0, 0] })
  const body = BSON.serialize(doc)
  const h = Buffer.alloc(HEADER_BYTES + 5)
  h.writeInt32LE(HEADER_BYTES + 5 + body.length, 0)
  h.writeInt32LE(reply.readInt32LE(4), 4)
  h.writeInt32LE(reply.readInt32LE(8), 8)
  h.writeInt32LE(OP_MSG, 12)
  return Buffer.concat([h, body])
}

let nextRequestID = 0x4F000000

/** An OP_MSG reply to `request` carrying `doc`. */
function replyTo (request, doc) {
  const body = BSON.serialize(doc)
  const h = Buffer.alloc(HEADER_BYTES + 5)
  h.writeInt32LE(HEADER_BYTES + 5 + body.length, 0)
  h.writeInt32LE(nextRequestID++ | 0, 4)
  h.writeInt32LE(request.readInt32LE(4), 8)
  h.writeInt32LE(OP_MSG, 12)
  return Buffer.concat([h, body])
}

const OVERLOADED = {
  ok: 0,
  errmsg: 'ingress request rate limit exceeded (overload bench token bucket)',
  code: 462,
  codeName: 'IngressRequestRateLimitExceeded',
  errorLabels: ['SystemOverloadedError', 'RetryableError'],
}

/** One client connection and its own connection to the server; its messages keep their order. */
class Link {
  #waiting = [] // client messages behind one the policy holds
  #holding = false
  #replyTo = -1
  #replied = null
  /** requestIDs of buildInfo commands whose replies are rewritten (policy.asMongoDB) */
  #buildInfos = new Set()
  closed = false

  constructor (client) {
    this.client = client
    this.upstream = net.connect({ host: targetHost, port: targetPort })
    this.upstream.setNoDelay(true)
    client.setNoDelay(true)
    const requests = new Framer()
    const replies = new Framer()
    client.on('data', chunk => { for (const m of requests.push(chunk)) this.#request(m) })
    this.upstream.on('data', chunk => {
      for (let m of replies.push(chunk)) {
        if (m.length >= HEADER_BYTES && this.#buildInfos.delete(m.readInt32LE(8))) m = asMongoDB82(m)
        if (!client.destroyed) client.write(m)
        if (this.#replied !== null && m.length >= HEADER_BYTES && m.readInt32LE(8) === this.#replyTo) this.#done()
      }
    })
    const end = () => this.close()
    for (const s of [client, this.upstream]) {
      s.on('error', end)
      s.on('close', end)
    }
  }

  close () {
    if (this.closed) return
    this.closed = true
    links.delete(this)
    this.client.destroy()
    this.upstream.destroy()
    this.#done()
  }

  /** Sends `msg` to the server; resolves when its reply is back (or the link is gone). */
  forward (msg) {
    if (this.closed) return Promise.resolve()
    this.#replyTo = msg.readInt32LE(4)
    const p = new Promise(resolve => { this.#replied = resolve })
    this.upstream.write(msg)
    return p
  }

  #done () {
    const r = this.#replied
    this.#replied = null
    r?.()
  }

  #request (msg) {
    if (this.#holding) { this.#waiting.push(msg); return }
    const info = commandOf(msg)
    if (info !== undefined && policy.asMongoDB === true && info.name.toLowerCase() === 'buildinfo') this.#buildInfos.add(msg.readInt32LE(4))
    if (info === undefined || !WRITE_COMMANDS.has(info.name) || !(info.collection ?? '').startsWith(policy.prefix)) { this.upstream.write(msg); return }
    counts.commands++
    counts.statements += info.statements
    if (policy.mode === 'bucket') {
      refill()
      if (tokens >= info.statements) {
        tokens -= info.statements
        accept(info)
        this.upstream.write(msg)
      } else {
        counts.refused++
        counts.refusedStatements += info.statements
        this.client.write(replyTo(msg, OVERLOADED))
      }
      return
    }
    if (policy.mode === 'queue') {
      this.#holding = true
      accept(info) // nothing is refused: accepted on arrival
      jobs.push({ link: this, msg, info, arrived: performance.now() })
      counts.maxQueued = Math.max(counts.maxQueued, jobs.length + (serving ? 1 : 0))
      serve()
      return
    }
    accept(info)
    this.upstream.write(msg)
  }

  /** The held message went (or was dropped): the ones behind it go on. */
  released () {
    this.#holding = false
    const waiting = this.#waiting
    this.#waiting = []
    for (const m of waiting) this.#request(m)
  }
}

/** bucket mode: the tokens earned since the last refill */
function refill () {
  const now = performance.now()
  tokens = Math.min(policy.burst, tokens + ((now - refilledAt) * policy.ratePerS) / 1000)
  refilledAt = now
}

function accept (info) {
  counts.accepted++
  counts.acceptedStatements += info.statements
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

/** The queue's one worker: service time, then the server's own round trip, one command at a time. */
async function serve () {
  if (serving) return
  serving = true
  while (jobs.length > 0) {
    const job = jobs.shift()
    if (job.link.closed) continue
    clock = Math.max(clock, job.arrived) + (job.info.statements * policy.serviceUs) / 1000
    const wait = clock - performance.now()
    if (wait >= 1) await sleep(wait) // a late timer makes the next command's wait shorter, not the run slower
    const sent = performance.now()
    const replied = job.link.forward(job.msg)
    job.link.released()
    await replied
    clock += performance.now() - sent
  }
  serving = false
}

const server = net.createServer(client => {
  counts.connections++
  links.add(new Link(client))
})
server.listen(0, '127.0.0.1', () => { parentPort.postMessage({ ready: server.address().port }) })

parentPort.on('message', ({ id, op, arg }) => {
  let result
  if (op === 'policy') {
    policy = { ...arg }
    tokens = arg.burst ?? 0
    refilledAt = performance.now()
    clock = 0
  } else if (op === 'stats') {
    if (policy.mode === 'bucket') refill()
    result = { ...counts, queued: jobs.length, tokens: Math.round(tokens) }
  } else if (op === 'reset') {
    counts = fresh()
  } else if (op === 'close') {
    for (const link of links) link.close()
    server.close()
  }
  parentPort.postMessage({ id, result })
})
