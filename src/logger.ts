/**
 * Minimal logger shape: pino, Fastify's `app.log`, or anything alike. Its own module, so the
 * modules that log (cache/bus.ts…) and options.ts, which takes one, need not import each other.
 */
export interface Logger {
  debug: (obj: object, msg?: string) => void
  warn: (obj: object, msg?: string) => void
  error: (obj: object, msg?: string) => void
  isLevelEnabled?: (level: string) => boolean
}
