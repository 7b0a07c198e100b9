// The overload suite's server stand-ins: a proxy in front of the real server, run in a worker
// thread (bench/overload-proxy-worker.mjs says what it does) so its timers and framing do not
// wait behind the app's event loop, as a server's would not.
import { Worker } from 'node:worker_threads'

export class OverloadProxy {
  #worker
  #next = 0
  #calls = new Map()

  constructor (worker, port) {
    this.#worker = worker
    this.port = port
    worker.on('message', ({ id, result }) => {
      const resolve = this.#calls.get(id)
      this.#calls.delete(id)
      resolve?.(result)
    })
  }

  /** Listens on 127.0.0.1, a free port, in front of the one host of `targetUri`. */
  static async start (targetUri) {
    const u = new URL(targetUri)
    if (u.host.includes(',')) throw new TypeError(`the overload proxy needs a URI with one host, got ${targetUri}`)
    const worker = new Worker(new URL('./overload-proxy-worker.mjs', import.meta.url), {
      workerData: { targetHost: u.hostname.replace(/^\[|\]$/g, ''), targetPort: Number(u.port || 27017) },
    })
    const port = await new Promise((resolve, reject) => {
      worker.once('error', reject)
      worker.once('message', m => resolve(m.ready))
    })
    worker.on('error', err => { console.error(`[bench] overload proxy: ${err.stack}`) })
    return new OverloadProxy(worker, port)
  }

  /** `original` with the proxy as its one host and directConnection=true (its other options kept). */
  uri (original) {
    const u = new URL(original)
    u.host = `127.0.0.1:${this.port}`
    u.searchParams.set('directConnection', 'true')
    return u.toString()
  }

  #call (op, arg) {
    const id = this.#next++
    return new Promise(resolve => {
      this.#calls.set(id, resolve)
      this.#worker.postMessage({ id, op, arg })
    })
  }

  /** { mode: 'pass' | 'queue' | 'bucket', prefix, serviceUs?, ratePerS?, burst?, asMongoDB? } for the write commands on the collections named `prefix`… */
  policy (p) { return this.#call('policy', p) }
  /** write commands (on the policy's collections) seen, accepted (sent to the server) and refused, and their writes */
  stats () { return this.#call('stats') }
  resetStats () { return this.#call('reset') }

  async close () {
    await this.#call('close')
    await this.#worker.terminate()
  }
}
