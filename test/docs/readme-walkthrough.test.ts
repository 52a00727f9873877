import { execFile } from 'node:child_process'
import { chmod, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import t from 'tap'
import { runInBash, shellBlock } from '../helpers/doc-shell-block.js'
import { startTestGateway } from '../helpers/gateway-process.js'
import { repoPath } from '../helpers/repo-root.js'

/**
 * The README's walk-through, run exactly as the README shows it (the shell block between
 * its walkthrough markers), twice in a row against one started gateway: the document
 * cannot drift from the product, and the walk-through can be repeated on one gateway.
 * It needs bash, curl, jq 1.6 or later and OpenSSL 3, as the README says (.ci/run installs jq).
 */

const REPO = repoPath()
const RUN_TIMEOUT_MS = 60_000

/** The commands of the README's walk-through block. */
const readmeWalkthrough = () => shellBlock('README.md', 'walkthrough')

/** The commands in bash from the repository's root, as a reader pastes them, with only `env` set. */
const runWalkthrough = (commands: string, env: Record<string, string>) => runInBash(commands, env, { timeoutMs: RUN_TIMEOUT_MS })

const git = (...args: string[]) =>
  new Promise<string>((resolve, reject) =>
    execFile('git', args, { cwd: REPO }, (err, stdout, stderr) => (err === null ? resolve(stdout) : reject(new Error(`git ${args.join(' ')}: ${stderr}`)))),
  )

/**
 * What the repository holds, ignored files included (a key file written into it would be
 * ignored by .gitignore, and still be a key in the repository): `git status` with ignored
 * files, and every file's path, size and mtime. Left out: what tests and builds write
 * (.tap/, dist/), node_modules/, .git/, and data/ (a developer's own gateway may be using it).
 */
async function repositoryState(): Promise<{ status: string; files: string[] }> {
  const status = (await git('status', '--porcelain', '--ignored', '--untracked-files=normal'))
    .split('\n')
    .filter((line) => !/^!! (\.tap|dist|node_modules|data)\/$/.test(line))
    .join('\n')
  const skipped = new Set(['.git', '.tap', 'dist', 'node_modules', 'data'].map((d) => join(REPO, d)))
  const files: string[] = []
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name)
      if (skipped.has(path)) continue
      if (entry.isDirectory()) await walk(path)
      else {
        const s = await stat(path)
        files.push(`${relative(REPO, path)} ${s.size} ${s.mtimeMs}`)
      }
    }
  }
  await walk(REPO)
  return { status, files: files.sort() }
}

t.test('the README walk-through runs as shown, twice in a row on one gateway, and writes nothing into the repository', async (t) => {
  const commands = await readmeWalkthrough()
  const gw = await startTestGateway(t)
  // Its own TMPDIR, to see that the work folder (with the private key) is removed.
  const tmp = await mkdtemp(join(tmpdir(), 'sgw-walkthrough-test-'))
  t.teardown(() => rm(tmp, { recursive: true, force: true }))
  const env = { PATH: process.env['PATH'] ?? '', HOME: tmp, TMPDIR: tmp, GATEWAY_URL: gw.url, ADMIN_TOKEN: gw.adminToken }

  const before = await repositoryState()
  const sources = new Set<string>()
  for (const round of [1, 2]) {
    const run = await runWalkthrough(commands, env)
    t.equal(run.code, 0, `run ${round} succeeds:\n${run.stdout}\n${run.stderr}`)
    const done = /^Done: source (src_\S+), key (key_\S+) \(active\)/m.exec(run.stdout)
    t.ok(done, `run ${round} reaches its last step`)
    if (done !== null) sources.add(done[1] as string)
    t.match(run.stdout, /"deduplicated":true/, `run ${round} shows the deduplicated retry`)
    t.same(await readdir(tmp), [], `run ${round} removed its work folder`)
  }
  t.equal(sources.size, 2, 'each run onboards a source of its own')
  t.same(await repositoryState(), before, 'the repository is as it was: no key, body or signing string written into it')

  // What the walk-through made is really there: the gateway lists each run's two refusals.
  for (const sourceId of sources) {
    const res = await fetch(`${gw.url}/v1/byo/sources/${sourceId}/ingest-errors`, { headers: { authorization: `Bearer ${gw.adminToken}` } })
    const body = (await res.json()) as { data: { code: string }[] }
    t.same(body.data.map((e) => e.code), ['invalid_severity', 'replayed_nonce'], `source ${sourceId}: its refusals`)
  }
})

t.test('a failing step names itself, prints the status and the error body, and stops', async (t) => {
  const commands = await readmeWalkthrough()
  const gw = await startTestGateway(t)
  const tmp = await mkdtemp(join(tmpdir(), 'sgw-walkthrough-test-'))
  t.teardown(() => rm(tmp, { recursive: true, force: true }))
  const run = await runWalkthrough(commands, { PATH: process.env['PATH'] ?? '', HOME: tmp, TMPDIR: tmp, GATEWAY_URL: gw.url, ADMIN_TOKEN: `not-the-admin-token-${'x'.repeat(24)}` })
  t.not(run.code, 0, 'the run fails')
  t.match(run.stderr, 'create creator token: expected HTTP 201, got 401')
  t.match(run.stderr, '"code": "unauthorized"', 'the error body is printed')
  t.notMatch(run.stdout, '2. source', 'no later step runs')
  t.same(await readdir(tmp), [], 'the work folder is removed on failure too')

  const down = await runWalkthrough(commands, { PATH: process.env['PATH'] ?? '', HOME: tmp, TMPDIR: tmp, GATEWAY_URL: 'http://127.0.0.1:1', ADMIN_TOKEN: gw.adminToken })
  t.not(down.code, 0)
  t.match(down.stderr, 'readiness: no answer from http://127.0.0.1:1 (is the gateway running?')
})

t.test('the walk-through checks its tools first: jq 1.6 or later, OpenSSL 3', async (t) => {
  const commands = await readmeWalkthrough()
  const bin = await mkdtemp(join(tmpdir(), 'sgw-walkthrough-tools-'))
  t.teardown(() => rm(bin, { recursive: true, force: true }))
  const fake = async (name: string, version: string) => {
    await writeFile(join(bin, name), `#!/bin/sh\necho '${version}'\n`)
    await chmod(join(bin, name), 0o755)
  }
  // Nothing is sent: the URL would refuse every connection anyway.
  const env = { PATH: `${bin}:${process.env['PATH'] ?? ''}`, HOME: bin, TMPDIR: bin, GATEWAY_URL: 'http://127.0.0.1:1', ADMIN_TOKEN: 'x'.repeat(40) }
  await fake('jq', 'jq-1.5')
  const oldJq = await runWalkthrough(commands, env)
  t.not(oldJq.code, 0)
  t.match(oldJq.stderr, 'jq-1.5 is too old: jq 1.6 or later is needed')
  await rm(join(bin, 'jq'))
  await fake('openssl', 'LibreSSL 3.3.6')
  const libre = await runWalkthrough(commands, env)
  t.not(libre.code, 0)
  t.match(libre.stderr, "'LibreSSL 3.3.6' is not OpenSSL 3 or later")
})
