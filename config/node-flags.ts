/**
 * The V8 flags the gateway process is started with. They cannot be set from inside
 * the process (the heap is sized when it is created) nor through NODE_OPTIONS, so
 * every launcher passes them: `npm start`, the systemd unit (test/gateway/launch-flags.test.ts
 * keeps those two in step), and harness/gateway-launcher.ts, which starts `dist/service/main.js`
 * for the tests and the benchmark. `service/main.ts` warns when they are missing.
 *
 * --initial-old-space-size=128: V8 sets the old generation's next collection point
 * from what survived the last full one, about 15 MB here, so after a burst the
 * gateway ran a mark-compact every 200–400 ms, and each one stalled about 150
 * requests behind its marking (on two cores the concurrent marker takes the verify
 * worker's core). A 128 MB floor makes them rare: at half the peak rate p99 went from
 * 12–28 ms to 8.7–10.4 ms in paired runs, for up to 40 MB more RSS (docs/benchmarks.md).
 *
 * --min-semi-space-size=8: after a few idle seconds V8 shrinks the young generation
 * to 1 MB, so the first seconds of the next burst scavenge every 8–13 ms. With an 8 MB
 * floor the half-peak window ran 135–175 scavenges instead of 210–250, the longest
 * pause fell from 6–8.4 ms to 3–4.7 ms, and RSS did not move beyond its noise. The
 * verify workers cap their own young generation (verify-pool.ts), so the floor is
 * not repeated in each of them.
 *
 * --no-allocation-site-pretenuring: at peak, with 256 requests in flight, most of a
 * request's objects live through two scavenges, so V8 learns to allocate them straight
 * into the old generation, and keeps doing so at half peak, where they die young and
 * wait for a mark-compact. Without it the old generation grew by 330–540 bytes per
 * accepted signal at half peak instead of 760–800, and p99 was lower in two of three
 * paired runs (docs/benchmarks.md).
 */
export const NODE_FLAGS: readonly string[] = ['--initial-old-space-size=128', '--min-semi-space-size=8', '--no-allocation-site-pretenuring']

/** A flag's name as V8 reads it: `--initial_old_space_size` and `--initial-old-space-size` are one flag. */
const flagName = (arg: string) => arg.split('=')[0]!.replaceAll('_', '-')

/**
 * The flags of NODE_FLAGS this process was started without. A flag given with another
 * value counts as given: an operator who sized the heap differently chose to.
 */
export function missingNodeFlags(execArgv: readonly string[] = process.execArgv): string[] {
  const given = new Set(execArgv.map(flagName))
  return NODE_FLAGS.filter((flag) => !given.has(flagName(flag)))
}
