// ESLint flat config.
// - Every .ts/.mjs file: neostandard (the Fastify ecosystem's standard style) with its TypeScript support.
// - src/**/*.ts (the published library) also gets typescript-eslint's strict type-aware rules,
//   with types from tsconfig.json through the project service.
import { defineConfig } from 'eslint/config'
import neostandard from 'neostandard'
import tseslint from 'typescript-eslint'

export default defineConfig(
  ...neostandard({
    ts: true,
    noJsx: true,
    ignores: ['dist/**', 'node_modules/**', 'coverage/**', '.scratch/**', 'bench/results/**'],
  }),
  {
    files: ['src/**/*.ts'],
    extends: [tseslint.configs.strictTypeChecked],
    languageOptions: {
      parserOptions: {
        projectService: true,
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      // Numbers in messages (`${n} bytes`, `${max}`) are safe to interpolate; everything else
      // (objects, nullish, any, booleans) still has to be turned into a string on purpose.
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true }],
      // Passing a caught `unknown` on (`catch (err) { return Promise.reject(err) }`) is a rethrow,
      // which only-throw-error already allows for `throw`: same rule for both.
      '@typescript-eslint/prefer-promise-reject-errors': ['error', { allowThrowingUnknown: true }],
      // Fastify tells promise-style hooks and plugins from callback-style ones by `async`:
      // an async hook without an await is the documented form, not a mistake.
      '@typescript-eslint/require-await': 'off',
      // Cached documents are plain objects that mirror MongoDB's own `$unset` by field name;
      // a Map cannot stand in for a document.
      '@typescript-eslint/no-dynamic-delete': 'off',
      // Not in the presets: a switch over a union (op kinds, error classes) must handle every member.
      '@typescript-eslint/switch-exhaustiveness-check': ['error', { considerDefaultExhaustiveForUnions: true }],
    },
  }
)
