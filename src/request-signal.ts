import type { FastifyRequest } from 'fastify'

/**
 * `request.writeSignal`: an AbortSignal that aborts when the client goes away before the
 * response is sent. Created on first access only. HTTP/1.1: it watches the socket's 'close',
 * and its listener is removed when the response is done, since a keep-alive socket lives on.
 * HTTP/2: the request's own stream, whose 'aborted' fires only when the stream ends before its
 * response did (its socket is a proxy of the session's, where a listener would never be
 * removed and every normal end would abort).
 *
 * Read after the response (onResponse already ran: in a later hook, or after `await
 * reply.send()`), it is a signal that never aborts and watches nothing: the client did not
 * go away before its answer, and a listener added then would stay on the keep-alive socket
 * for as long as the connection lives, one more per request.
 */
const kAbort = Symbol('fastify-write-buffer.abort')
/** the request's onResponse hook ran */
const RESPONDED = 0
interface Watch { signal: AbortSignal, socket: NodeJS.EventEmitter | null, event: string, onClose: (() => void) | null }
/** the HTTP/2 compatibility request's stream */
interface Http2Stream extends NodeJS.EventEmitter { aborted: boolean, destroyed: boolean }
interface WithAbort { [kAbort]?: Watch | typeof RESPONDED }

export function writeSignal (this: FastifyRequest): AbortSignal {
  const req = this as FastifyRequest & WithAbort
  const state = req[kAbort]
  if (state !== undefined && state !== RESPONDED) return state.signal
  const controller = new AbortController()
  if (state === RESPONDED) {
    req[kAbort] = { signal: controller.signal, socket: null, event: '', onClose: null }
    return controller.signal
  }
  const onClose = (): void => { controller.abort() }
  const stream = (req.raw as { stream?: Http2Stream }).stream
  if (stream !== undefined) {
    req[kAbort] = { signal: controller.signal, socket: stream, event: 'aborted', onClose }
    if (stream.aborted) controller.abort()
    else stream.once('aborted', onClose)
    return controller.signal
  }
  const socket = req.raw.socket
  req[kAbort] = { signal: controller.signal, socket, event: 'close', onClose }
  if (socket.destroyed) controller.abort()
  else socket.once('close', onClose)
  return controller.signal
}

/** onResponse hook: the request is over, its socket lives on. */
export async function releaseWriteSignal (request: FastifyRequest): Promise<void> {
  const req = request as FastifyRequest & WithAbort
  const state = req[kAbort]
  if (state === undefined) {
    req[kAbort] = RESPONDED
  } else if (state !== RESPONDED && state.socket !== null && state.onClose !== null) {
    state.socket.removeListener(state.event, state.onClose)
    state.socket = null
  }
}
