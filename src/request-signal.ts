import type { FastifyRequest } from 'fastify'

/**
 * `request.writeSignal`: an AbortSignal that aborts when the client goes away before the
 * response is sent. Created on first access only; its socket listener is removed when the
 * response is done, since a keep-alive socket lives on.
 */
const kAbort = Symbol('fastify-write-buffer.abort')
interface WithAbort { [kAbort]?: { controller: AbortController, socket: NodeJS.EventEmitter, onClose: () => void } }

export function writeSignal (this: FastifyRequest): AbortSignal {
  const req = this as FastifyRequest & WithAbort
  let state = req[kAbort]
  if (state === undefined) {
    const controller = new AbortController()
    const socket = req.raw.socket
    const onClose = (): void => { controller.abort() }
    state = { controller, socket, onClose }
    req[kAbort] = state
    if (socket.destroyed) controller.abort()
    else socket.once('close', onClose)
  }
  return state.controller.signal
}

/** onResponse hook: the request is over, its socket lives on. */
export async function releaseWriteSignal (request: FastifyRequest): Promise<void> {
  const state = (request as FastifyRequest & WithAbort)[kAbort]
  if (state !== undefined) state.socket.removeListener('close', state.onClose)
}
