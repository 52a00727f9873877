/**
 * Read allowances: a token bucket per caller key (a client address, a token, a rental),
 * refilled at a rate a minute and holding at most a minute's worth. Asynchronous so that
 * a cluster adapter (one allowance shared by every process, on a shared store) can stand
 * behind the same interface; the in-process adapter counts per process.
 */
export interface ReadRateLimiter {
  /**
   * Takes one read from `key`'s allowance of `perMinute`. Resolves with 0 when the read
   * may go ahead, else with the whole seconds until one may (the 429's Retry-After).
   */
  take(key: string, perMinute: number): Promise<number>
}
