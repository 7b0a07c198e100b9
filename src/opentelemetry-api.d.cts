import type * as Api from '@opentelemetry/api'

/** `@opentelemetry/api` when it is installed, else undefined (./opentelemetry-api.cjs). */
export declare function loadOpenTelemetryApi (): typeof Api | undefined
