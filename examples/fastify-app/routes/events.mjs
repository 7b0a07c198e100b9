import { perAddress } from '../rate-limits.mjs'
import { idReply } from '../schemas.mjs'

/** The largest event body: a tracking event is small; Fastify's default (1 MiB) let one request store a megabyte. */
export const EVENT_BODY_LIMIT = 16 * 1024

const eventBody = {
  type: 'object',
  required: ['type'],
  additionalProperties: false,
  properties: {
    type: { type: 'string', minLength: 1, maxLength: 64 },
    payload: { $ref: '#/definitions/document' },
  },
  // Any JSON object the server will store: no field name, at any depth, that starts
  // with '$' or holds a '.' or NUL (a server refusal would otherwise surface as a 500).
  definitions: {
    document: {
      type: 'object',
      propertyNames: { pattern: '^[^$.\\u0000][^.\\u0000]*$' },
      additionalProperties: { $ref: '#/definitions/value' },
    },
    value: {
      if: { type: 'object' },
      then: { $ref: '#/definitions/document' },
      else: { if: { type: 'array' }, then: { type: 'array', items: { $ref: '#/definitions/value' } } },
    },
  },
}

/**
 * POST /events {type, payload?} → 202 {id}, once the buffered insert is acknowledged; 413 past
 * EVENT_BODY_LIMIT bytes, 429 past `limits.eventsPerAddress`.
 */
export default async function eventsRoute (app, { limits }) {
  const events = app.writeBuffer.collection('events')

  app.post('/events', {
    bodyLimit: EVENT_BODY_LIMIT,
    // per client address, before the body is parsed; with the counters' Redis down, tracking
    // goes on uncounted (login and register fail closed instead: rate-limits.mjs)
    config: { rateLimit: { ...perAddress(limits.eventsPerAddress), skipOnError: true } },
    schema: { body: eventBody, response: { 202: idReply } },
  }, async (request, reply) => {
    const { type, payload = null } = request.body
    // dropped (if not yet sent) when the client goes away before the answer
    const { insertedId } = await events.insertOne({ type, payload, at: new Date() }, { signal: request.writeSignal })
    return reply.code(202).send({ id: insertedId.toHexString() })
  })
}
