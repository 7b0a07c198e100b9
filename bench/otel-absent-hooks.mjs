// Module hooks for the hot-path worker: `@opentelemetry/api` cannot be resolved, as in an
// application that does not install it (the buffer then never traces). Compared with the
// same build where the API is installed but no SDK is registered, this isolates what
// tracing costs a user who does not use it.
export async function resolve (specifier, context, next) {
  if (specifier === '@opentelemetry/api') {
    throw Object.assign(new Error(`Cannot find package '${specifier}' (hidden by the bench)`), { code: 'ERR_MODULE_NOT_FOUND' })
  }
  return next(specifier, context)
}
