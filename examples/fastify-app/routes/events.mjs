import { idReply } from '../schemas.mjs'

const eventBody = {
  type: 'object',
  required: ['type'],
  additionalProperties: false,
  properties: {
    type: { type: 'string', minLength: 1, maxLength: 64 },
    payload: { type: 'object' },
  },
}

/** POST /events {type, payload?} → 202 {id}, once the buffered insert is acknowledged. */
export default async function eventsRoute (app) {
  const events = app.writeBuffer.collection('events')

  app.post('/events', {
    schema: { body: eventBody, response: { 202: idReply } },
  }, async (request, reply) => {
    const { type, payload = null } = request.body
    const { insertedId } = await events.insertOne({ type, payload, at: new Date() })
    return reply.code(202).send({ id: insertedId.toHexString() })
  })
}
