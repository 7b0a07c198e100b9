import type { ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { createServer } from 'node:net'

export async function freePort (): Promise<number> {
  const server = createServer()
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as { port: number }
  server.close()
  await once(server, 'close')
  return port
}

/** Calls `onLine` with each whole line `stream` prints. */
export function eachLine (stream: NodeJS.ReadableStream | null | undefined, onLine: (line: string) => void): void {
  let buffered = ''
  stream?.setEncoding('utf8').on('data', (chunk: string) => {
    buffered += chunk
    let nl: number
    while ((nl = buffered.indexOf('\n')) !== -1) {
      const line = buffered.slice(0, nl)
      buffered = buffered.slice(nl + 1)
      onLine(line)
    }
  })
}

/** Resolves with the address once the server logs "Server listening at …". */
export function listeningAddress (child: ChildProcess, output: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    eachLine(child.stdout, line => {
      output.push(line)
      const match = /Server listening at (http:\/\/[^\s"]+)/.exec(line)
      if (match !== null) resolve(match[1] as string)
    })
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => { output.push(chunk) })
    child.once('exit', code => { reject(new Error(`server exited (${String(code)}) before listening:\n${output.join('\n')}`)) })
  })
}
