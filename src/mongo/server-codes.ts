/**
 * What a whole write command answered `{ ok: 0, code }` says about its statements.
 *
 * An unordered `insert` / `update` / `delete` command reports a statement's own failure in
 * `writeErrors` of an `ok: 1` reply; `ok: 0` is the command's failure. Whether any statement
 * was applied before it depends on where the server raised the code:
 * - `before`: MongoDB raises it while parsing, authorizing or routing the command, before the
 *   first statement runs: nothing of the command was applied (a proven refusal);
 * - `during`: it can interrupt a command after some statements were applied (the server is
 *   shutting down, stepping down, out of time, in trouble): ambiguous.
 * A code not listed is ambiguous. The table is MongoDB's; a server that is not MongoDB
 * (FerretDB, DocumentDB, a cloud API) raises its own codes at its own moments — FerretDB
 * answered InternalError after committing part of a batch, and its `$where` refusal (BadValue)
 * after statement 0 — so from such a server no `ok: 0` proves anything (see server-identity.ts).
 *
 * `transient`: the server is in trouble or busy rather than refusing the write: worth
 * sending the write again after a backoff (only if it is retry-safe when `during`).
 *
 * Sources (mongodb/mongo, r8.0): src/mongo/base/error_codes.yml (names, the
 * `NotPrimaryError`, `Interruption`, `ShutdownError`, `RetriableError` categories);
 * src/mongo/db/query/write_ops/write_ops_exec.cpp (`handleError`: interruptions are rethrown
 * and fail the whole command after earlier statements were applied — "These have always failed
 * the whole batch"; other statement errors, including update parsing ($foo → 9, $inc on a
 * string → 14), become writeErrors); src/mongo/db/query/write_ops/write_ops.cpp (parsing); src/mongo/db/commands/write_commands/write_commands.cpp and
 * src/mongo/idl (parsing: FailedToParse, TypeMismatch, IDLUnknownField… before execution);
 * src/mongo/db/service_entry_point_common.cpp (auth, maxTimeMS and writeConcern parsing,
 * not-primary check before the command runs). The driver: node-mongodb-native src/error.ts
 * (`RETRYABLE_WRITE_ERROR_CODES`, `NoWritesPerformed`, `RetryableWriteError`).
 */

export interface CodeRule {
  /** where MongoDB raises it for a write command: `before` any statement runs, or possibly `during` */
  readonly when: 'before' | 'during'
  readonly transient: boolean
}

const BEFORE: CodeRule = { when: 'before', transient: false }
/** refused before running, because of the server's state now: send again later */
const BEFORE_TRANSIENT: CodeRule = { when: 'before', transient: true }
const DURING_TRANSIENT: CodeRule = { when: 'during', transient: true }

/** code → rule, with the name (error_codes.yml) and where MongoDB raises it for a write command. */
const RULES: ReadonlyMap<number, CodeRule> = new Map([
  // parse / validation of the command document (IDL parser, write_ops_parsers.cpp)
  [2, BEFORE], //          BadValue: command-level values (e.g. an empty `documents` array); statement values are writeErrors
  [4, BEFORE], //          NoSuchKey: a required command field missing
  [9, BEFORE], //          FailedToParse (an update's sort + multi check raises it mid-command; the buffer never sends a sort)
  [16, BEFORE], //         InvalidLength: no statements, or more than maxWriteBatchSize (write_ops.cpp checkOpCountForCommand)
  [26, BEFORE], //         NamespaceNotFound
  [14, BEFORE], //         TypeMismatch: a command field of the wrong BSON type
  [72, BEFORE], //         InvalidOptions: bad writeConcern / command options
  [73, BEFORE], //         InvalidNamespace
  [10334, BEFORE], //      BSONObjectTooLarge: the command message itself
  [40414, BEFORE], //      IDLFailedToParse (missing required field)
  [40415, BEFORE], //      IDLUnknownField
  // authorization (service_entry_point_common: checkAuthorization, before the command runs)
  [13, BEFORE], //         Unauthorized
  [18, BEFORE], //         AuthenticationFailed
  // the command cannot run here at all
  [59, BEFORE], //         CommandNotFound
  [115, BEFORE], //        CommandNotSupported
  [166, BEFORE], //        CommandNotSupportedOnView
  [20, BEFORE], //         IllegalOperation (e.g. writes to a capped / system namespace, checked up front)
  [10107, BEFORE_TRANSIENT], // NotWritablePrimary: checked before running (service_entry_point_common)
  [13435, BEFORE_TRANSIENT], // NotPrimaryNoSecondaryOk
  [13436, BEFORE_TRANSIENT], // NotPrimaryOrSecondary
  [134, BEFORE_TRANSIENT], // ReadConcernMajorityNotAvailableYet: waitForReadConcern runs before the command
  [462, BEFORE_TRANSIENT], //   IngressRequestRateLimitExceeded / admission control (8.x): shed before executing
  // may interrupt a command after some statements were applied (write_ops_exec handleError rethrows)
  [1, DURING_TRANSIENT], //     InternalError
  [6, DURING_TRANSIENT], //     HostUnreachable (mongos → shard)
  [7, DURING_TRANSIENT], //     HostNotFound
  [50, DURING_TRANSIENT], //    MaxTimeMSExpired
  [89, DURING_TRANSIENT], //    NetworkTimeout
  [91, DURING_TRANSIENT], //    ShutdownInProgress
  [112, DURING_TRANSIENT], //   WriteConflict (normally retried inside the server)
  [150, DURING_TRANSIENT], //   StaleEpoch
  [63, DURING_TRANSIENT], //    StaleShardVersion
  [13388, DURING_TRANSIENT], // StaleConfig
  [189, DURING_TRANSIENT], //   PrimarySteppedDown
  [262, DURING_TRANSIENT], //   ExceededTimeLimit
  [9001, DURING_TRANSIENT], //  SocketException
  [11600, DURING_TRANSIENT], // InterruptedAtShutdown
  [11601, DURING_TRANSIENT], // Interrupted
  [11602, DURING_TRANSIENT], // InterruptedDueToReplStateChange
  [16500, DURING_TRANSIENT], // TooManyRequests (Azure Cosmos DB for MongoDB: request rate too large, mid-bulk)
  [24, DURING_TRANSIENT], //    LockTimeout
  [473, DURING_TRANSIENT], //   InterruptedDueToOverload (8.x): a running command killed to shed load, no RetryableError label
  [46, DURING_TRANSIENT], //    LockBusy
  [226, DURING_TRANSIENT], //   TemporarilyUnavailable
  [365, DURING_TRANSIENT], //   TransactionTooLargeForCache
])

const UNKNOWN_CODE: CodeRule = { when: 'during', transient: false }

/** Whether the table knows `code` (an unlisted one, such as Atlas's 8000, may be anything: isolate.ts stops splitting on it sooner). */
export function knownCode (code: number): boolean {
  return RULES.has(code)
}

/** The rule for a code of a whole-command failure (an unlisted code: ambiguous, not transient). */
export function ruleOf (code: number | undefined): CodeRule {
  return code === undefined ? UNKNOWN_CODE : RULES.get(code) ?? UNKNOWN_CODE
}
