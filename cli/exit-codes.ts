/**
 * The exit codes scripts can trust, the same for every command:
 * 0 done; 1 refused by the service (a 4xx other than 429), or a push, check or delivery
 * that was refused; 2 a usage error (a missing or bad option, no token); 3 the gateway
 * could not be reached, or still failed after the command's retries (no answer, 5xx, 429).
 */
export const EXIT = { done: 0, refused: 1, usage: 2, unreachable: 3 } as const

export type ExitCode = (typeof EXIT)[keyof typeof EXIT]

/** An error a command ends with: its message is printed, its exit code returned. */
export class CliError extends Error {
  readonly exitCode: ExitCode
  constructor(exitCode: ExitCode, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.exitCode = exitCode
  }
}

export const usageError = (message: string) => new CliError(EXIT.usage, message)
