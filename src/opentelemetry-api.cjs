'use strict'
// `@opentelemetry/api`, loaded synchronously when it is installed (an optional peer), else
// undefined; types in ./opentelemetry-api.d.cts. Plain CommonJS, the same file in both builds
// (scripts/build.mjs copies it to dist/ and dist/cjs/): its `require` is the real one and
// resolves from the package's own location, as an import would, without the `import.meta`
// the CommonJS build cannot have. Synchronous, so a write queued in the turn the buffer was
// built is traced too.
exports.loadOpenTelemetryApi = function loadOpenTelemetryApi () {
  try {
    return require('@opentelemetry/api')
  } catch {
    return undefined // not installed (or failing to load): no tracing, never a crash
  }
}
