/**
 * A vitest reporter for the watchdog of scripts/test.mjs: appends `start <ms> <project> <file>`
 * and `end <ms> <project> <file>` to the file named by FWB_RUNNING_LOG as each test file starts
 * and ends, so a run stopped for taking too long can name the files still running. Every
 * project's files, though it lives beside the unit harness (the tests' own tooling). Appends are
 * synchronous: the log is whole whenever the run is killed.
 */
import { appendFileSync } from 'node:fs'
import type { Reporter, TestModule } from 'vitest/node'

export default class RunningFilesReporter implements Reporter {
  readonly #log = process.env.FWB_RUNNING_LOG

  onTestModuleStart (testModule: TestModule): void {
    this.#note('start', testModule)
  }

  onTestModuleEnd (testModule: TestModule): void {
    this.#note('end', testModule)
  }

  #note (event: 'start' | 'end', testModule: TestModule): void {
    if (this.#log === undefined || this.#log === '') return
    appendFileSync(this.#log, `${event} ${Date.now()} ${testModule.project.name} ${testModule.relativeModuleId}\n`)
  }
}
