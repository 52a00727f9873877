import { existsSync, readdirSync, readFileSync } from 'node:fs'
import t from 'tap'
import { parseAllDocuments, parse as parseYaml } from 'yaml'
import { CONFIG_VARIABLES, loadConfig, NODE_FLAGS } from '../../config/index.js'
import { repoPath } from '../helpers/repo-root.js'

/**
 * The container image, the compose files and the Kubernetes manifests cannot be built or
 * run here (no container engine), so they are read: every variable they give the service
 * is one config/index.ts declares and, taken together per process, a configuration the
 * loader accepts; every file they copy or mount exists; the image runs as a non-root user
 * on Debian bookworm with the V8 flags of config/node-flags.ts; every role has its
 * process, its probes point at routes the service serves, and the Services and budgets
 * select pods that exist.
 */

const read = (path: string) => readFileSync(repoPath(path), 'utf8')
const known = new Set(CONFIG_VARIABLES)
/** A usable admin token for the `${ADMIN_TOKEN}` the cluster compose file takes from the shell. */
const SHELL = { ADMIN_TOKEN: 'a'.repeat(40) }

/** Each service's environment with `${NAME...}` from the shell filled in. */
function withShell(env: Record<string, unknown>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(env).map(([k, v]) => [k, String(v).replace(/\$\{(\w+)[^}]*\}/g, (_, name: string) => (SHELL as Record<string, string>)[name] ?? '')]),
  )
}

/** Names outside the configuration schema, and the loader's refusal of the whole set if any. */
function configProblems(env: Record<string, string>): string[] {
  const unknown = Object.keys(env).filter((name) => !known.has(name)).map((name) => `${name} is not a configuration variable`)
  try {
    loadConfig(env)
    return unknown
  } catch (err) {
    return [...unknown, (err as Error).message]
  }
}

// --- Dockerfile -------------------------------------------------------------

interface Instruction {
  readonly op: string
  readonly args: string
}

function dockerInstructions(text: string): Instruction[] {
  const joined = text.replace(/\\\n/g, ' ')
  return joined
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const [op, ...rest] = line.split(/\s+/)
      return { op: (op as string).toUpperCase(), args: rest.join(' ') }
    })
}

const dockerfile = dockerInstructions(read('Dockerfile'))
const dockerignore = read('.dockerignore')
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l !== '' && !l.startsWith('#'))

t.test('the Dockerfile: two stages on Debian bookworm, a non-root user, the V8 flags', async (t) => {
  const froms = dockerfile.filter((i) => i.op === 'FROM').map((i) => i.args)
  t.equal(froms.length, 2, 'a build stage and a runtime stage')
  for (const from of froms) t.match(from, /^node:20-bookworm(-slim)?\b/, `${from}: Node 20 on glibc 2.36`)
  const stages = dockerfile.reduce<Instruction[][]>((acc, i) => (i.op === 'FROM' ? [...acc, [i]] : (acc.at(-1)?.push(i), acc)), [])
  const runtime = stages.at(-1) as Instruction[]
  const user = runtime.filter((i) => i.op === 'USER').at(-1)?.args
  t.ok(user !== undefined && !/^(root|0)(:|$)/.test(user), `the runtime stage runs as ${user}`)
  t.ok(
    runtime.some((i) => i.op === 'COPY' && /--from=build\s+\/app\/dist\b/.test(i.args)),
    'dist/ comes from the build stage',
  )
  t.ok(stages[0]?.some((i) => i.op === 'RUN' && i.args.includes('npm run build')), 'the build stage builds')
  const cmd = JSON.parse(runtime.find((i) => i.op === 'CMD')?.args ?? '[]') as string[]
  t.same(cmd, ['node', ...NODE_FLAGS, 'dist/service/main.js'])
})

t.test("every path the Dockerfile copies from the build context exists and is not in .dockerignore", async (t) => {
  const sources = dockerfile
    .filter((i) => i.op === 'COPY' && !i.args.startsWith('--from'))
    .flatMap((i) => i.args.split(/\s+/).slice(0, -1))
  t.ok(sources.length > 10, `${sources.length} sources`)
  for (const source of sources) {
    t.ok(existsSync(repoPath(source)), `${source} exists`)
    t.notOk(dockerignore.some((pattern) => source === pattern || source.startsWith(`${pattern}/`)), `${source} is sent to the build`)
  }
  // Every folder the build compiles is copied: tsconfig.build.json's include against the COPY lines.
  const build = JSON.parse(read('tsconfig.build.json')) as { include: string[] }
  for (const pattern of build.include) t.ok(sources.includes(pattern.split('/')[0] as string), `${pattern} is copied`)
})

t.test('the Dockerfile sets only configuration variables, and valid ones', async (t) => {
  const env: Record<string, string> = {}
  for (const i of dockerfile.filter((i) => i.op === 'ENV')) {
    for (const m of i.args.matchAll(/(\w+)=(\S+)/g)) env[m[1] as string] = m[2] as string
  }
  t.ok(Object.keys(env).length > 0)
  t.same(configProblems(env), [])
})

// --- compose ----------------------------------------------------------------

interface ComposeService {
  image?: string
  build?: unknown
  environment?: Record<string, unknown>
  volumes?: string[]
}

const compose = (file: string) => parseYaml(read(file), { merge: true }) as { services: Record<string, ComposeService> }
const ownImage = (s: ComposeService) => s.image?.startsWith('signal-ingest-gateway') === true

/** Mounted files the operator writes (the scrape token, a credential kept out of the repository). */
const PROVIDED_ELSEWHERE = new Set(['deploy/prometheus/metrics-token'])

function bindSources(service: ComposeService): string[] {
  return (service.volumes ?? []).map((v) => v.split(':')[0] as string).filter((source) => source.startsWith('.'))
}

for (const [file, roles] of [
  ['deploy/compose.embedded.yml', ['all']],
  ['deploy/compose.cluster.yml', ['gateway', 'recorder', 'delivery']],
] as const) {
  t.test(`${file}: the service's processes, their configuration, their mounts`, async (t) => {
    const { services } = compose(file)
    const own = Object.entries(services).filter(([, s]) => ownImage(s))
    t.same([...new Set(own.map(([, s]) => s.environment?.['ROLE']))].sort(), [...roles].sort(), 'one process per role at least')
    for (const [name, service] of own) t.same(configProblems(withShell(service.environment ?? {})), [], `${name}'s environment`)
    for (const [name, service] of Object.entries(services)) {
      for (const source of bindSources(service)) {
        const path = `deploy/${source.replace(/^\.\//, '')}`
        if (PROVIDED_ELSEWHERE.has(path)) continue
        t.ok(existsSync(repoPath(path)), `${name} mounts ${path}, which exists`)
      }
    }
  })
}

t.test('the cluster compose file has three NATS servers on deploy/nats/, ClickHouse, nginx, Prometheus and Grafana', async (t) => {
  const { services } = compose('deploy/compose.cluster.yml')
  for (const name of ['nats-1', 'nats-2', 'nats-3', 'clickhouse', 'nginx', 'prometheus', 'grafana']) t.ok(services[name], name)
  for (const n of [1, 2, 3]) t.ok(services[`nats-${n}`]?.volumes?.some((v) => v.startsWith(`./nats/nats-${n}.conf:`)), `nats-${n} runs deploy/nats/nats-${n}.conf`)
  const natsUrl = String(services['recorder']?.environment?.['NATS_URL'])
  t.same(natsUrl.split(',').sort(), ['nats://nats-1:4222', 'nats://nats-2:4222', 'nats://nats-3:4222'], 'every process is given all three')
  const prometheus = parseYaml(read('deploy/prometheus/prometheus.yml')) as { scrape_configs: { static_configs: { targets: string[] }[] }[] }
  const targets = prometheus.scrape_configs.flatMap((c) => c.static_configs.flatMap((s) => s.targets.map((x) => x.split(':')[0])))
  const ownNames = Object.entries(services).filter(([, s]) => ownImage(s)).map(([name]) => name)
  t.same(targets.sort(), ownNames.sort(), 'Prometheus scrapes every process of the service')
})

// --- Kubernetes ---------------------------------------------------------------

interface K8sObject {
  kind: string
  metadata: { name: string; labels?: Record<string, string> }
  data?: Record<string, string>
  stringData?: Record<string, string>
  spec?: {
    selector?: { matchLabels?: Record<string, string> } & Record<string, string>
    template?: { metadata: { labels: Record<string, string> }; spec: { containers: K8sContainer[]; securityContext?: { runAsNonRoot?: boolean } } }
  }
}
interface Probe {
  httpGet?: { path: string }
}
interface K8sContainer {
  args?: string[]
  env?: { name: string; value?: string }[]
  envFrom?: ({ configMapRef?: { name: string } } & { secretRef?: { name: string } })[]
  livenessProbe?: Probe
  readinessProbe?: Probe
  startupProbe?: Probe
}

const k8sFiles = readdirSync(repoPath('deploy/k8s')).filter((f) => f.endsWith('.yaml'))
const objects: K8sObject[] = k8sFiles.flatMap((f) =>
  parseAllDocuments(read(`deploy/k8s/${f}`)).map((doc) => {
    if (doc.errors.length > 0) throw new Error(`deploy/k8s/${f}: ${doc.errors[0]?.message}`)
    return doc.toJS() as K8sObject
  }),
)
const byKind = (kind: string) => objects.filter((o) => o.kind === kind)
const matches = (selector: Record<string, string>, labels: Record<string, string>) => Object.entries(selector).every(([k, v]) => labels[k] === v)

t.test('Kubernetes: a Deployment per role, each with a configuration the loader accepts', async (t) => {
  const deployments = byKind('Deployment')
  const roleOf = (d: K8sObject) => d.spec?.template?.spec.containers[0]?.env?.find((e) => e.name === 'ROLE')?.value
  t.same(deployments.map(roleOf).sort(), ['delivery', 'gateway', 'recorder'])
  for (const d of deployments) {
    const container = d.spec?.template?.spec.containers[0] as K8sContainer
    const env: Record<string, string> = {}
    for (const from of container.envFrom ?? []) {
      const ref = from.configMapRef?.name ?? from.secretRef?.name
      const source = objects.find((o) => o.metadata.name === ref && (o.kind === (from.configMapRef ? 'ConfigMap' : 'Secret')))
      t.ok(source, `${d.metadata.name}: ${ref} is among the manifests`)
      Object.assign(env, source?.data, source?.stringData)
    }
    for (const e of container.env ?? []) env[e.name] = e.value ?? ''
    t.same(configProblems(env), [], `${d.metadata.name}'s environment`)
    t.same(container.args, ['node', ...NODE_FLAGS, 'dist/service/main.js'], `${d.metadata.name}: the V8 flags`)
    t.equal(d.spec?.template?.spec.securityContext?.runAsNonRoot, true, `${d.metadata.name} runs as non-root`)
    t.equal(container.livenessProbe?.httpGet?.path, '/healthz', `${d.metadata.name}: liveness on /healthz`)
    t.equal(container.startupProbe?.httpGet?.path, '/healthz', `${d.metadata.name}: startup on /healthz`)
    t.equal(container.readinessProbe?.httpGet?.path, '/readyz', `${d.metadata.name}: readiness on /readyz`)
  }
  const recorder = deployments.find((d) => roleOf(d) === 'recorder') as K8sObject & { spec: { replicas: number; strategy: { type: string } } }
  t.equal(recorder.spec.replicas, 1, 'one recorder: it holds the consumer under a lease')
  t.equal(recorder.spec.strategy.type, 'Recreate', 'and an update never runs two')
})

t.test('Kubernetes: every Service and PodDisruptionBudget selects the pods of a Deployment', async (t) => {
  const podLabels = byKind('Deployment').map((d) => d.spec?.template?.metadata.labels ?? {})
  const services = byKind('Service')
  const budgets = byKind('PodDisruptionBudget')
  t.ok(services.length >= 2 && budgets.length >= 1)
  for (const s of services) t.ok(podLabels.some((l) => matches(s.spec?.selector as Record<string, string>, l)), `Service ${s.metadata.name}`)
  for (const b of budgets) t.ok(podLabels.some((l) => matches(b.spec?.selector?.matchLabels ?? {}, l)), `PodDisruptionBudget ${b.metadata.name}`)
  for (const d of byKind('Deployment')) {
    t.ok(matches(d.spec?.selector?.matchLabels ?? {}, d.spec?.template?.metadata.labels ?? {}), `${d.metadata.name} selects its own pods`)
  }
})

t.test('the configuration check refuses an unknown variable and a bad value (the check itself)', async (t) => {
  t.same(configProblems({ PORT: '8080' }), [])
  t.match(configProblems({ PROT: '8080' }), [/PROT is not a configuration variable/])
  t.match(configProblems({ PORT: 'eighty' }), [/PORT/])
})
