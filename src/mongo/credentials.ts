/**
 * Credentials kept out of messages: the user info of a connection string (parsed or not)
 * masked, its query left out, and a known user name or password masked where it stands.
 */

const MASK = '***'

/** Where `url`'s user info stands, parsed or not: from its first `//` (or its start) to its last `@`. */
function userInfoOf (url: string): { from: number, to: number } | undefined {
  const at = url.lastIndexOf('@')
  if (at < 0) return undefined
  const slashes = url.indexOf('//')
  return { from: slashes >= 0 && slashes < at ? slashes + 2 : 0, to: at }
}

/**
 * `url` as a message may show it, parsed or not: its user info masked (`mongodb://***@host/`)
 * and its query, which may hold secrets too (`tlsCertificateKeyFilePassword`,
 * `authMechanismProperties`), left out (`?...`). The user info ends at the last `@`, not the
 * first: a password written with an unescaped `@` is what makes a url malformed to begin with.
 */
export function urlWithoutCredentials (url: string): string {
  const info = userInfoOf(url)
  const shown = info === undefined ? url : `${url.slice(0, info.from)}${MASK}${url.slice(info.to)}`
  const query = shown.indexOf('?')
  return query < 0 ? shown : `${shown.slice(0, query)}?...`
}

/** The user name and password written in `url`, as written and percent-decoded, parsed or not. */
export function credentialsIn (url: string): string[] {
  const info = userInfoOf(url)
  if (info === undefined) return []
  const userInfo = url.slice(info.from, info.to)
  const colon = userInfo.indexOf(':')
  const out: string[] = []
  for (const part of colon < 0 ? [userInfo] : [userInfo.slice(0, colon), userInfo.slice(colon + 1)]) {
    out.push(part)
    try { out.push(decodeURIComponent(part)) } catch { /* a malformed escape: as written only */ }
  }
  return out
}

/**
 * `text` without credentials: the user info of any connection string in it masked, and each
 * of `secrets` (a user name, a password) masked wherever it stands as a whole word. Whole
 * words only, so a short user name does not garble the rest ("a" in "Database names"); the
 * driver echoes a user name alone ("Username contains unescaped characters bob/x").
 */
export function withoutCredentials (text: string, secrets: readonly string[] = []): string {
  let out = text.replace(/\/\/[^\s"'`]*@/g, `//${MASK}@`)
  for (const secret of [...new Set(secrets)].filter(s => s !== '').sort((a, b) => b.length - a.length)) {
    const escaped = secret.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
    out = out.replace(new RegExp(`(?<![A-Za-z0-9])${escaped}(?![A-Za-z0-9])`, 'g'), MASK)
  }
  return out
}
