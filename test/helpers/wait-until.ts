/** Resolves once `what` holds, checking every 5 ms; throws naming `why` after `ms`. */
export const until = async (what: () => boolean | Promise<boolean>, ms = 10_000, why = 'condition') => {
  const end = Date.now() + ms
  while (!(await what())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${why}`)
    await new Promise((r) => setTimeout(r, 5))
  }
}
