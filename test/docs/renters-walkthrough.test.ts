import { mkdtemp, readdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import t from 'tap'
import { runInBash, shellBlock } from '../helpers/doc-shell-block.js'
import { startTestGateway } from '../helpers/gateway-process.js'

/**
 * renters.md's "From nothing to a verified delivery", run exactly as the page shows it
 * (the shell block between its renter-walkthrough markers) against one started gateway,
 * with the two variables the page names: the operator's steps, `sgw listen` feeding a
 * local receiver, the delivery verified with the printed secret, and the same event by
 * polling and `sgw tail`. bash runs it with errexit, so the first step that fails ends the
 * run (a reader pasting it sees that step's error). It needs bash, curl and jq, as the
 * page says, and the built CLI (dist/cli/main.js).
 */

const RUN_TIMEOUT_MS = 90_000

t.test("renters.md's walk-through runs as shown: the delivery verifies, and polling and tail give the same event", async (t) => {
  const commands = await shellBlock('docs/renters.md', 'renter-walkthrough')
  const gw = await startTestGateway(t)
  // Its own TMPDIR, to see that the work folder (with the source's private key) is removed.
  const tmp = await mkdtemp(join(tmpdir(), 'sgw-renter-walkthrough-'))
  t.teardown(() => rm(tmp, { recursive: true, force: true }))
  const env = { PATH: `${dirname(process.execPath)}:${process.env['PATH'] ?? ''}`, HOME: tmp, TMPDIR: tmp, GATEWAY: gw.url, ADMIN_TOKEN: gw.adminToken }

  const run = await runInBash(commands, env, { timeoutMs: RUN_TIMEOUT_MS, bashOptions: ['-e', '-u', '-o', 'pipefail'] })
  const shown = { stdout: run.stdout, stderr: run.stderr }
  t.equal(run.code, 0, 'the block exits 0', shown)

  const verified = /^valid: msg_(rnt_\S+?)_(\d+), signed v1 at \d{4}-\d\d-\d\dT/m.exec(run.stdout)
  t.ok(verified, 'sgw verify-webhook says the delivery is valid, scheme v1', shown)
  if (verified === null) return
  const [, rentalId, eventId] = verified as unknown as [string, string, string]
  t.match(run.stdout, new RegExp(`^receiver got msg_${rentalId}_${eventId}: \\{"event":"byo\\.signal\\.accepted"`, 'm'), 'the receiver printed the delivery')
  t.match(run.stdout, new RegExp(`^rental_id\\s.*\\n${rentalId}\\s+renter-\\S+\\s+src_\\S+\\s+active\\s`, 'm'), 'the renter lists its rental, active')

  const polled = run.stdout
    .split('\n')
    .filter((line) => line.startsWith('{"event":'))
    .map((line) => JSON.parse(line) as { event: string; event_id: string; rental_id: string; signal_id: string; severity: string })
  t.match(polled, [{ event: 'byo.signal.accepted', event_id: eventId, rental_id: rentalId, signal_id: /^sig-/, severity: 'critical' }], 'polling gives that event, and only it (the test signal is never delivered)')
  t.match(run.stdout, new RegExp(`^${eventId}\\s+byo\\.signal\\.accepted\\s+signal_id=sig-`, 'm'), 'sgw tail gives that event')
  t.same(await readdir(tmp), [], 'the work folder is removed')
})
