// One canonical form per username, used to store it and to look it up, so that "Alice" and
// "alice", or "josé" typed with a precomposed "é" (U+00E9) and with "e" + a combining acute
// (U+0301), are one and the same user. See the README ("Usernames") for the choice.

/** NFKC, then lower case (locale-independent), then NFKC again: lower-casing may un-normalise. */
export function canonicalUsername (name) {
  return name.normalize('NFKC').toLowerCase().normalize('NFKC')
}

/**
 * preValidation hook for routes whose body has a `username`: replaces it by its canonical
 * form before the JSON schema checks it, so the schema's pattern and length apply to what is
 * stored. Anything that is not a string is left for the schema to refuse.
 */
export async function canonicalizeUsername (request) {
  const body = request.body
  // longer than the schema allows (32) by a wide margin: left for the schema to refuse, not
  // normalised (NFKC can grow a string 18-fold: a big body would block the event loop)
  if (body !== null && typeof body === 'object' && typeof body.username === 'string' && body.username.length <= 128) {
    body.username = canonicalUsername(body.username)
  }
}
