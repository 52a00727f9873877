import { execFile as execFileCb, execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { apiRequest } from '../../harness/api-request.js'
import { startTestGateway } from '../helpers/gateway-process.js'
import { repoPath } from '../helpers/repo-root.js'

/**
 * `@signal-ingest-gateway/sdk` from another project, installed as a user installs it: the
 * tarball `npm pack -w sdk` makes (from the sdk/dist/ the test run built; the pack's own
 * prepack, a clean build of the SDK, is skipped because other tests read sdk/dist/ while
 * this one runs), put into a fresh project with `npm install <tarball>` (dependencies from
 * npm's cache, the registry only when the cache lacks them). The project's node_modules
 * then holds the SDK and its two dependencies and nothing else. There, the documented
 * example (examples/sdk-push.mjs) runs against a started gateway, and TypeScript compiles
 * a consumer against the package's types.
 */

const execFile = promisify(execFileCb)
const root = repoPath()
const work = mkdtempSync(join(tmpdir(), 'sdk-consumer-'))
t.teardown(() => rmSync(work, { recursive: true, force: true }))

const project = join(work, 'project')
mkdirSync(project)
execFileSync('npm', ['pack', '-w', 'sdk', '--ignore-scripts', '--silent', '--pack-destination', work], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] })
const tarball = readdirSync(work).find((f) => f.endsWith('.tgz')) as string
writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'creator-project', private: true, type: 'module' }))
const installStarted = Date.now()
execFileSync('npm', ['install', join(work, tarball), '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: project, stdio: ['ignore', 'pipe', 'pipe'] })
const installMs = Date.now() - installStarted

const node = (args: string[], env: Record<string, string> = {}) => execFile(process.execPath, args, { cwd: project, env: { PATH: process.env.PATH ?? '', ...env }, timeout: 60_000 })

t.test('the tarball holds the built SDK and its package.json, nothing of the service', async (t) => {
  const files = execFileSync('tar', ['-tzf', join(work, tarball)]).toString().trim().split('\n').sort()
  t.ok(files.includes('package/dist/index.js') && files.includes('package/dist/index.d.ts'))
  t.ok(files.includes('package/dist/signing-string.js'), 'the signing string the gateway verifies with comes along')
  t.same(files.filter((f) => !/^package\/dist\/[\w-]+\.(js|d\.ts)$/.test(f)), ['package/package.json'])
})

t.test('npm install of the tarball pulls the SDK and its two dependencies, nothing else', async (t) => {
  const installed = (dir: string): string[] => readdirSync(dir).filter((f) => !f.startsWith('.')).flatMap((f) => (f.startsWith('@') ? readdirSync(join(dir, f)).map((g) => `${f}/${g}`) : [f]))
  t.same(installed(join(project, 'node_modules')).sort(), ['@noble/ed25519', '@noble/hashes', '@signal-ingest-gateway/sdk'])
  t.comment(`npm install of the tarball: ${installMs} ms`)
})

t.test('the documented example runs from another project and pushes to a started gateway', async (t) => {
  const gw = await startTestGateway(t)
  const creatorId = 'example_creator'
  const token = await apiRequest(gw.url, 'POST', '/v1/admin/tokens', { token: gw.adminToken, body: { role: 'creator', subject: creatorId } })
  t.equal((await apiRequest(gw.url, 'POST', '/v1/admin/agents', { token: gw.adminToken, body: { agent_id: 'example_agent', creator_id: creatorId, slots: 1 } })).status, 201)
  const keyFile = join(work, 'source-key.pem')
  execFileSync('openssl', ['genpkey', '-algorithm', 'ed25519', '-out', keyFile])
  writeFileSync(join(project, 'sdk-push.mjs'), readFileSync(resolve(root, 'examples/sdk-push.mjs')))
  const { stdout } = await node(['sdk-push.mjs'], { GATEWAY_URL: gw.url, CREATOR_TOKEN: token.body.data.token, AGENT_ID: 'example_agent', KEY_FILE: keyFile })
  const accepted = JSON.parse(stdout)
  t.match(accepted, { ok: true, status: 'accepted', signal_id: /^sig_/ })
  const sources = await apiRequest(gw.url, 'GET', '/v1/byo/agents/example_agent/sources', { token: token.body.data.token })
  t.equal(sources.body.data[0]?.source_id, accepted.source_id, 'onboarded under the agent with the creator token')
})

t.test('only the entry and the signing string are exported: a deep import is refused', async (t) => {
  const { stdout } = await node(['--input-type=module', '-e', "import('@signal-ingest-gateway/sdk/dist/source-client.js').then(() => console.log('loaded'), (e) => console.log(e.code))"])
  t.equal(stdout.trim(), 'ERR_PACKAGE_PATH_NOT_EXPORTED')
})

t.test("TypeScript resolves the package's types through exports (browser lib, no Node types)", async (t) => {
  writeFileSync(
    join(project, 'consumer.ts'),
    [
      "import { loadCreatorKey, SourceClient, type AcceptedSignal, type PushError } from '@signal-ingest-gateway/sdk'",
      "const key = await loadCreatorKey('-----BEGIN PRIVATE KEY-----')",
      "const client = new SourceClient({ gatewayUrl: 'https://gw.example', sourceId: 's', keyId: 'k', key })",
      "const accepted: AcceptedSignal = await client.push({ signal_id: 'sig_12345678' }, { deadlineMs: 1000 })",
      'export const flags: [boolean | undefined, PushError["code"] | undefined] = [accepted.deduplicated, undefined]',
      '// @ts-expect-error: retry options are typed',
      "client.push({}, { deadlineMs: '5s' })",
    ].join('\n'),
  )
  const options = { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, lib: ['ES2022', 'DOM'], types: [] }
  writeFileSync(join(project, 'tsconfig.json'), JSON.stringify({ compilerOptions: options, files: ['consumer.ts'] }))
  const result = await node([resolve(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json']).then(
    () => ({ code: 0, out: '' }),
    (e: { code: number; stdout: string }) => ({ code: e.code, out: e.stdout }),
  )
  t.same(result, { code: 0, out: '' })
})
