// `fastify-write-buffer`: the core (also at `fastify-write-buffer/core`, without Fastify) and the plugin.
export * from './core.js'
export {
  default, writeBufferPlugin,
  type WriteBufferPluginOptions, type WriteBufferPluginDbOptions, type WriteBufferPluginUrlOptions,
} from './plugin.js'
