/**
 * The exit codes scripts can trust, the same for every command:
 * 0 done; 1 refused by the service (a 4xx other than 429), or a push, check or delivery
 * that was refused; 2 a usage error (a missing or bad option, no token); 3 the gateway
 * could not be reached, or still failed after the command's retries (no answer, 5xx, 429);
 * 4 not verified: a receipt's proof bundle or the receipt log failed a check (a bad
 * signature, a proof that does not lead to the root, a fork). 4 is kept apart from 1
 * because these commands also call the gateway: a script must tell the service's
 * ordinary refusal (fix the call) from evidence that the log or the bundle is not what
 * it claims (raise it with the operator).
 */
export const EXIT = { done: 0, refused: 1, usage: 2, unreachable: 3, notVerified: 4 } as const

export type ExitCode = (typeof EXIT)[keyof typeof EXIT]

/** An error a command ends with: its message is printed, its exit code returned. */
export class CliError extends Error {
  readonly exitCode: ExitCode
  /** For a refusal by the service: the error code it answered (`not_yet_logged`, …). */
  readonly apiCode: string | undefined
  constructor(exitCode: ExitCode, message: string, options?: { cause?: unknown; apiCode?: string }) {
    super(message, options)
    this.exitCode = exitCode
    this.apiCode = options?.apiCode
  }
}

export const usageError = (message: string) => new CliError(EXIT.usage, message)
