import { describe, expect, it } from 'vitest'
import { credentialsIn, urlWithoutCredentials, withoutCredentials } from '../../src/mongo/credentials.js'

// The urls a message may have to show are the malformed ones: the masking cannot rely on parsing.
describe('credentials never reach a message', () => {
  it('a url shows its scheme and hosts, its user info masked up to the last @ and its query left out', () => {
    expect(urlWithoutCredentials(' mongodb://admin:Hunter2@db.example:27017/app')).toBe(' mongodb://***@db.example:27017/app')
    expect(urlWithoutCredentials('mongodb+srv//admin:Hunter2@db.example/')).toBe('mongodb+srv//***@db.example/')
    expect(urlWithoutCredentials('mongodb://admin:Hun@ter/2@db.example/')).toBe('mongodb://***@db.example/')
    expect(urlWithoutCredentials('admin:Hunter2@db.example//x')).toBe('***@db.example//x')
    expect(urlWithoutCredentials('mongodb://db.example/?tlsCertificateKeyFilePassword=Kitten9')).toBe('mongodb://db.example/?...')
    expect(urlWithoutCredentials('mongodb://db.example:27017/app')).toBe('mongodb://db.example:27017/app')
  })

  it('the user name and password of a url, as written and decoded, parsed or not', () => {
    expect(credentialsIn('mongodb://admin:p%40ss@h/')).toEqual(['admin', 'admin', 'p%40ss', 'p@ss'])
    expect(credentialsIn('mongodb://ad/min:a:b@h/')).toEqual(['ad/min', 'ad/min', 'a:b', 'a:b'])
    expect(credentialsIn('mongodb://bob:%zz@h/')).toEqual(['bob', 'bob', '%zz'])
    expect(credentialsIn('mongodb://h/')).toEqual([])
  })

  it('a text loses every connection string\'s user info and each secret standing as a word, nothing else', () => {
    expect(withoutCredentials('at "mongodb://u:p@ss@h:1/" and mongodb+srv://x:y@z/')).toBe('at "mongodb://***@h:1/" and mongodb+srv://***@z/')
    expect(withoutCredentials('Username contains unescaped characters ad/min', ['ad/min', 'Hunter2'])).toBe('Username contains unescaped characters ***')
    expect(withoutCredentials('p@ss (p@ss)', ['p@ss'])).toBe('*** (***)')
    // a short user name does not garble the rest of the message
    expect(withoutCredentials('Database names cannot contain the character \'.\'', ['a', 'n'])).toBe('Database names cannot contain the character \'.\'')
  })
})
