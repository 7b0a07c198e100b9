// `fastify-write-buffer`: the core (also at `fastify-write-buffer/core`, without Fastify) and the plugin.
export * from './core.js'
// `fastifyWriteBuffer`: the name Fastify plugins' CommonJS entries carry (scripts/cjs-entry.mjs)
export {
  default, writeBufferPlugin, writeBufferPlugin as fastifyWriteBuffer,
  type WriteBufferPluginOptions, type WriteBufferPluginDbOptions, type WriteBufferPluginUrlOptions,
} from './plugin.js'
