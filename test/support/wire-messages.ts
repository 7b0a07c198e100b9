import { BSON, type Document } from 'mongodb'

// The MongoDB wire protocol, as far as the fault proxy needs it: framing a byte stream into
// messages, reading what command a request carries (without deserializing its documents), and
// building or rewriting replies. Message layouts: the driver's lib/cmap/commands.js and the
// specifications' message/OP_MSG.md.

export const OP_REPLY = 1
export const OP_QUERY = 2004
export const OP_COMPRESSED = 2012
export const OP_MSG = 2013

const CHECKSUM_PRESENT = 1
const MORE_TO_COME = 2
const HEADER_BYTES = 16

export interface MessageHeader { length: number, requestID: number, responseTo: number, opCode: number }

export function readHeader (msg: Buffer): MessageHeader {
  return { length: msg.readInt32LE(0), requestID: msg.readInt32LE(4), responseTo: msg.readInt32LE(8), opCode: msg.readInt32LE(12) }
}

/** Cuts a connection's byte stream into whole messages (messageLength first), whatever the chunks. */
export class MessageFramer {
  #pending: Buffer[] = []
  #pendingBytes = 0

  /** The messages `chunk` completes, in order; a partial one waits for the next chunk. */
  push (chunk: Buffer): Buffer[] {
    this.#pending.push(chunk)
    this.#pendingBytes += chunk.length
    const messages: Buffer[] = []
    while (this.#pendingBytes >= 4) {
      const head = this.#pending[0]!.length >= 4 ? this.#pending[0]! : this.#join()
      const length = head.readInt32LE(0)
      // a length no message can have: pass the rest on as it is, unframed
      if (length < HEADER_BYTES) { messages.push(this.rest()); break }
      if (this.#pendingBytes < length) break
      const all = this.#join()
      messages.push(all.subarray(0, length))
      this.#pending = all.length > length ? [all.subarray(length)] : []
      this.#pendingBytes -= length
    }
    return messages
  }

  /** The bytes of a message not yet complete (taken: the framer starts empty). */
  rest (): Buffer {
    const all = this.#join()
    this.#pending = []
    this.#pendingBytes = 0
    return all
  }

  #join (): Buffer {
    if (this.#pending.length > 1) this.#pending = [Buffer.concat(this.#pending)]
    return this.#pending[0] ?? Buffer.alloc(0)
  }
}

/** What a request says about its command: read from the top level of its body, documents left as bytes. */
export interface CommandInfo {
  name: string
  /** the first field's value, when it is a string (a collection name) */
  collection?: string
  lsid?: unknown
  txnNumber?: number
  /** documents / updates / deletes / ops, in the body or as document sequences */
  statements: number
  /** a handshake's client.application.name */
  appName?: string
  /** OP_MSG moreToCome (an unacknowledged write): the server sends no reply */
  moreToCome: boolean
  /** a retryable write outside a transaction: txnNumber without autocommit */
  retryableWrite: boolean
}

const STATEMENT_FIELDS = new Set(['documents', 'updates', 'deletes', 'ops'])

/** The command an OP_MSG or OP_QUERY request carries; undefined for anything else (or a malformed one). */
export function readCommand (msg: Buffer): CommandInfo | undefined {
  try {
    const opCode = msg.readInt32LE(12)
    if (opCode === OP_MSG) return readOpMsg(msg)
    if (opCode === OP_QUERY) return readOpQuery(msg)
  } catch {
    // a message this reader does not understand is passed on untouched
  }
  return undefined
}

function readOpMsg (msg: Buffer): CommandInfo | undefined {
  const flags = msg.readUInt32LE(16)
  const end = (flags & CHECKSUM_PRESENT) !== 0 ? msg.length - 4 : msg.length
  let info: CommandInfo | undefined
  let sequenced = 0
  for (let at = 20; at < end;) {
    const kind = msg[at]
    const size = msg.readInt32LE(at + 1)
    if (kind === 0) {
      info = readBody(msg, at + 1)
    } else if (kind === 1) {
      // a document sequence: int32 size, cstring identifier, then documents to the end
      const idEnd = msg.indexOf(0, at + 5)
      const id = msg.toString('utf8', at + 5, idEnd)
      if (STATEMENT_FIELDS.has(id)) {
        for (let doc = idEnd + 1; doc < at + 1 + size; doc += msg.readInt32LE(doc)) sequenced++
      }
    } else {
      return undefined
    }
    at += 1 + size
  }
  if (info === undefined) return undefined
  info.statements += sequenced
  info.moreToCome = (flags & MORE_TO_COME) !== 0
  return info
}

function readOpQuery (msg: Buffer): CommandInfo | undefined {
  const nameEnd = msg.indexOf(0, 20)
  const queryAt = nameEnd + 1 + 8
  // a command's query may be wrapped: { $query: { … }, $readPreference: … }
  const first = elements(msg, queryAt).next()
  const wrapped = first.done !== true && first.value.name === '$query' && first.value.type === 0x03
  return readBody(msg, wrapped ? first.value.valueStart : queryAt)
}

function readBody (buf: Buffer, docAt: number): CommandInfo {
  const info: CommandInfo = { name: '', statements: 0, moreToCome: false, retryableWrite: false }
  let autocommit = false
  for (const el of elements(buf, docAt)) {
    if (info.name === '') {
      info.name = el.name
      if (el.type === 0x02) info.collection = buf.toString('utf8', el.valueStart + 4, el.valueEnd - 1)
    } else if (el.name === 'lsid' && el.type === 0x03) {
      info.lsid = BSON.deserialize(buf.subarray(el.valueStart, el.valueEnd))
    } else if (el.name === 'txnNumber') {
      if (el.type === 0x12) info.txnNumber = Number(buf.readBigInt64LE(el.valueStart))
      else if (el.type === 0x10) info.txnNumber = buf.readInt32LE(el.valueStart)
    } else if (el.name === 'autocommit') {
      autocommit = true
    } else if (el.type === 0x04 && STATEMENT_FIELDS.has(el.name)) {
      info.statements += count(elements(buf, el.valueStart))
    } else if (el.name === 'client' && el.type === 0x03) {
      const name = (BSON.deserialize(buf.subarray(el.valueStart, el.valueEnd)) as { application?: { name?: unknown } }).application?.name
      if (typeof name === 'string') info.appName = name
    }
  }
  info.retryableWrite = info.txnNumber !== undefined && !autocommit
  return info
}

function count (items: Iterable<unknown>): number {
  let n = 0
  for (const _item of items) n++ // eslint-disable-line @typescript-eslint/no-unused-vars
  return n
}

interface Element { type: number, name: string, valueStart: number, valueEnd: number }

/** The top-level elements of the BSON document at `docAt`, each value left as its byte range. */
function * elements (buf: Buffer, docAt: number): Generator<Element> {
  const docEnd = docAt + buf.readInt32LE(docAt) - 1
  let at = docAt + 4
  while (at < docEnd) {
    const type = buf[at]!
    const nameEnd = buf.indexOf(0, at + 1)
    const name = buf.toString('utf8', at + 1, nameEnd)
    const valueStart = nameEnd + 1
    const valueEnd = valueStart + valueSize(buf, type, valueStart)
    yield { type, name, valueStart, valueEnd }
    at = valueEnd
  }
}

function valueSize (buf: Buffer, type: number, at: number): number {
  switch (type) {
    case 0x01: case 0x09: case 0x11: case 0x12: return 8 // double, date, timestamp, int64
    case 0x02: case 0x0D: case 0x0E: return 4 + buf.readInt32LE(at) // string, code, symbol
    case 0x03: case 0x04: case 0x0F: return buf.readInt32LE(at) // document, array, code with scope
    case 0x05: return 5 + buf.readInt32LE(at) // binary: size, subtype, bytes
    case 0x06: case 0x0A: case 0x7F: case 0xFF: return 0 // undefined, null, maxKey, minKey
    case 0x07: return 12 // ObjectId
    case 0x08: return 1
    case 0x0B: { const pattern = buf.indexOf(0, at); return buf.indexOf(0, pattern + 1) + 1 - at } // regex: two cstrings
    case 0x0C: return 4 + buf.readInt32LE(at) + 12 // DBPointer
    case 0x10: return 4
    case 0x13: return 16 // decimal128
    default: throw new RangeError(`BSON type 0x${type.toString(16)} unknown`)
  }
}

let nextRequestID = 0x5A000000

function header (length: number, responseTo: number, opCode: number): Buffer {
  const h = Buffer.alloc(HEADER_BYTES)
  h.writeInt32LE(length, 0)
  h.writeInt32LE(nextRequestID++ | 0, 4)
  h.writeInt32LE(responseTo, 8)
  h.writeInt32LE(opCode, 12)
  return h
}

/** A reply to the request with this header carrying `doc`: OP_MSG, or OP_REPLY when the request was an OP_QUERY. */
export function replyTo (request: MessageHeader, doc: Document): Buffer {
  const body = BSON.serialize(doc)
  const { requestID, opCode } = request
  if (opCode === OP_QUERY) {
    const fields = Buffer.alloc(20) // responseFlags, cursorID, startingFrom, numberReturned
    fields.writeInt32LE(1, 16)
    return Buffer.concat([header(HEADER_BYTES + 20 + body.length, requestID, OP_REPLY), fields, body])
  }
  const flagsAndKind = Buffer.alloc(5) // flagBits 0, section kind 0
  return Buffer.concat([header(HEADER_BYTES + 5 + body.length, requestID, OP_MSG), flagsAndKind, body])
}

/** Whether an OP_MSG reply says more replies follow without a request (an exhaust stream). */
export function repliesMore (reply: Buffer): boolean {
  return reply.readInt32LE(12) === OP_MSG && (reply.readUInt32LE(16) & MORE_TO_COME) !== 0
}

/**
 * The body of an OP_MSG or OP_REPLY reply (its first document), or undefined for anything else.
 * Numbers stay BSON Int32 / Double / Long, so writing it back changes no field's type.
 */
export function readReply (reply: Buffer): Document | undefined {
  const opCode = reply.readInt32LE(12)
  const bytes = (at: number): Document => BSON.deserialize(reply.subarray(at, at + reply.readInt32LE(at)), { promoteValues: false })
  if (opCode === OP_REPLY) return bytes(36)
  if (opCode !== OP_MSG) return undefined
  const flags = reply.readUInt32LE(16)
  const end = (flags & CHECKSUM_PRESENT) !== 0 ? reply.length - 4 : reply.length
  for (let at = 20; at < end; at += 1 + reply.readInt32LE(at + 1)) {
    if (reply[at] === 0) return bytes(at + 1)
  }
  return undefined
}

/**
 * The same reply with `doc` as its body: same requestID, responseTo and flags, other sections kept.
 * A checksum would no longer match, so it is dropped (and its flag cleared): it is optional.
 */
export function withReply (reply: Buffer, doc: Document): Buffer {
  const body = BSON.serialize(doc)
  const old = readHeader(reply)
  const h = Buffer.alloc(HEADER_BYTES)
  h.writeInt32LE(old.requestID, 4)
  h.writeInt32LE(old.responseTo, 8)
  h.writeInt32LE(old.opCode, 12)
  const parts: Uint8Array[] = [h]
  if (old.opCode === OP_REPLY) {
    const fields = Buffer.from(reply.subarray(16, 36))
    fields.writeInt32LE(1, 16)
    parts.push(fields, body)
  } else {
    const flags = reply.readUInt32LE(16)
    const end = (flags & CHECKSUM_PRESENT) !== 0 ? reply.length - 4 : reply.length
    const flagBits = Buffer.alloc(4)
    flagBits.writeUInt32LE((flags & ~CHECKSUM_PRESENT) >>> 0)
    parts.push(flagBits)
    for (let at = 20; at < end;) {
      const size = reply.readInt32LE(at + 1)
      parts.push(reply[at] === 0 ? Buffer.concat([Buffer.from([0]), body]) : reply.subarray(at, at + 1 + size))
      at += 1 + size
    }
  }
  const out = Buffer.concat(parts)
  out.writeInt32LE(out.length, 0)
  return out
}
