// An Error with a statusCode: Fastify's default error handler answers with that status
// and `{ statusCode, error, message }`.
export function httpError (statusCode, message) {
  return Object.assign(new Error(message), { statusCode })
}
