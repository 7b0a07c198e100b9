// JSON schemas shared by the routes. With the strict Ajv options set in app.mjs, anything
// that is not exactly the declared shape (an object where a string belongs, `$gt`, extra
// keys) is refused with 400 before a handler runs, so no user input reaches a filter as
// an operator.

// Checked after canonicalUsername (username.mjs): lower-case letters of any script (with
// their combining marks), digits, '_', '.', '-'. Never '$', NUL or an operator.
export const username = { type: 'string', pattern: '^[\\p{L}\\p{M}\\p{Nd}_.-]{3,32}$' }
export const password = { type: 'string', minLength: 8, maxLength: 128 }

export const credentials = {
  type: 'object',
  required: ['username', 'password'],
  additionalProperties: false,
  properties: { username, password },
}

export const idReply = {
  type: 'object',
  required: ['id'],
  properties: { id: { type: 'string' } },
}
