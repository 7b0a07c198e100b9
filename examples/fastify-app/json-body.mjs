import { httpError } from './http-error.mjs'

/**
 * How deeply a JSON body may nest objects and arrays. Validating a recursive schema (the
 * events payload) costs stack frames per level: 10,000 levels overflowed the stack and
 * answered 500. MongoDB itself stores at most 100 levels. 32 is plenty for an event payload.
 */
export const MAX_JSON_DEPTH = 32

/** Whether `text` opens more than `max` nested objects/arrays (outside strings). One pass, no recursion. */
export function nestedDeeperThan (text, max) {
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 0x5c /* \ */) i++ // the escaped character cannot end the string
      else if (c === 0x22 /* " */) inString = false
    } else if (c === 0x22) {
      inString = true
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (++depth > max) return true
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      depth--
    }
  }
  return false
}

/**
 * Replaces Fastify's application/json parser by the same parser (prototype and constructor
 * poisoning refused) behind a depth check: a body nested deeper than MAX_JSON_DEPTH is a 400
 * before it is parsed, and so before any schema walks it.
 */
export function boundJsonDepth (app) {
  const parse = app.getDefaultJsonParser('error', 'error')
  app.removeContentTypeParser('application/json')
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (nestedDeeperThan(body, MAX_JSON_DEPTH)) {
      done(Object.assign(httpError(400, `body is nested too deeply (at most ${MAX_JSON_DEPTH} levels)`), { code: 'BODY_TOO_DEEP' }), undefined)
      return
    }
    parse(request, body, done)
  })
}

/**
 * Error handler: a 4xx is answered as Fastify would; the write buffer's 503s with their code
 * and headers (Retry-After) but a fixed message (theirs may name a host or a driver error);
 * anything else is logged and answered with a bare 500, so no internal message (a stack
 * overflow, a driver or server error, a document description) reaches the client.
 */
export function hideInternalErrors (app) {
  app.setErrorHandler((err, request, reply) => {
    const status = err.statusCode ?? 500
    if (typeof err.code === 'string' && err.code.startsWith('WRITE_BUFFER_') && status === 503) {
      request.log.warn({ err }, 'write not done')
      reply.code(503).headers(err.headers ?? {}).send({ statusCode: 503, code: err.code, error: 'Service Unavailable', message: 'try again later' })
      return
    }
    if (status !== 500) {
      reply.send(err)
      return
    }
    request.log.error({ err }, 'request failed')
    reply.code(500).send({ statusCode: 500, error: 'Internal Server Error', message: 'Internal Server Error' })
  })
}
