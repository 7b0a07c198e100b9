import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'

/**
 * `request.writeSignal`: an AbortSignal that aborts when the client goes away before its
 * response was sent. Created on first access only.
 * - HTTP/1.1: it watches the request's own response (`reply.raw`, remembered by the plugin's
 *   onRequest hook), whose 'close' comes when it finished or when its connection closed first:
 *   only the second aborts. A listener on the keep-alive socket would have to be removed once
 *   the response is done, by a hook that an earlier async onResponse hook can delay past the
 *   socket's close (`Connection: close`): a request answered normally would then abort.
 * - HTTP/2: the request's own stream, whose 'aborted' fires only when the stream ends before its
 *   response did.
 * Read once the response has finished, it is a signal that never aborts and watches nothing.
 */
const kAbort = Symbol('fastify-write-buffer.abort')
const kResponse = Symbol('fastify-write-buffer.response')
/** the HTTP/1.1 response: 'close' when it finished or its connection closed first */
interface Response extends NodeJS.EventEmitter { writableFinished: boolean, destroyed: boolean }
/** the HTTP/2 compatibility request's stream */
interface Http2Stream extends NodeJS.EventEmitter { aborted: boolean, destroyed: boolean }
interface WithAbort { [kAbort]?: AbortSignal, [kResponse]?: Response }

/** onRequest hook: the request's response, for writeSignal (one property; nothing else per request). */
export function rememberResponse (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
  (request as FastifyRequest & WithAbort)[kResponse] = reply.raw
  done()
}

export function writeSignal (this: FastifyRequest): AbortSignal {
  const req = this as FastifyRequest & WithAbort
  const existing = req[kAbort]
  if (existing !== undefined) return existing
  const controller = new AbortController()
  req[kAbort] = controller.signal
  const stream = (req.raw as { stream?: Http2Stream }).stream
  if (stream !== undefined) {
    if (stream.aborted) controller.abort()
    else if (!stream.destroyed) stream.once('aborted', () => { controller.abort() })
    return controller.signal
  }
  const res = req[kResponse]
  // answered already (or a request the hook never saw): nothing to watch
  if (res === undefined || res.writableFinished) return controller.signal
  if (res.destroyed) controller.abort()
  else res.once('close', () => { if (!res.writableFinished) controller.abort() })
  return controller.signal
}
