import type { AgentView, IngestErrorView, KeyView, Page, SignalView, SourceView } from './creator-api.js'
import type { CreatorKey } from './creator-key.js'
import { CreatorApiError } from './errors.js'
import { ApiCaller } from './api-call.js'
import type { RetryOptions } from './retry-policy.js'
import { SourceClient, type AcceptedSignal } from './source-client.js'

export interface CreatorClientOptions {
  /** The gateway's base URL, with its path prefix if it has one. */
  readonly gatewayUrl: string
  /** The creator's API token (role creator), from the gateway's operator. */
  readonly token: string
  readonly fetch?: typeof fetch
}

export interface OnboardSourceInput {
  /** An agent of this creator with an open slot (the operator creates agents). */
  readonly agentId: string
  readonly manifest: Record<string, unknown>
  readonly listing?: Record<string, unknown> | null
  /** The key the source signs with. */
  readonly key: CreatorKey
  /** The test signal pushed with the pending key: `source_id` is set, `ts` is now unless given. Use a signal_id of its own. */
  readonly testSignal: Readonly<Record<string, unknown>>
  /** For the test push and the returned client. */
  readonly retry?: RetryOptions
}

export interface OnboardedSource {
  readonly source: SourceView
  readonly keyId: string
  /** The test signal's 202 body (`test: true`). */
  readonly testAccepted: AcceptedSignal
  /** Pushes with the promoted key. */
  readonly client: SourceClient
}

export interface AddKeyInput {
  readonly sourceId: string
  readonly key: CreatorKey
  /** As in `OnboardSourceInput`. */
  readonly testSignal: Readonly<Record<string, unknown>>
  readonly retry?: RetryOptions
}

/**
 * The control-plane calls a creator makes with its own token: sources under its agents,
 * their keys (register, promote after a test signal, revoke) and their refused pushes.
 * Creating creator tokens and agents is the operator's (admin token), not here.
 * Calls are sent once: creating a source is not idempotent, and a retry after a lost answer
 * would take a second slot (`listSources` finds a source whose creation answer was lost).
 */
export class CreatorClient {
  readonly #api: ApiCaller
  readonly #fetch: typeof fetch
  readonly #gatewayUrl: string

  constructor(options: CreatorClientOptions) {
    this.#gatewayUrl = options.gatewayUrl
    this.#fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init))
    this.#api = new ApiCaller({ ...options, fetch: this.#fetch }, (step, status, body) => new CreatorApiError(step, status, body))
  }

  getAgent(agentId: string): Promise<AgentView> {
    return this.#call('get agent', 'GET', `/v1/byo/agents/${enc(agentId)}`)
  }

  /** The agent's sources, oldest first. */
  listSources(agentId: string, page: { limit?: number; cursor?: string } = {}): Promise<Page<SourceView>> {
    return this.#page('list sources', `/v1/byo/agents/${enc(agentId)}/sources`, page)
  }

  createSource(input: { agentId: string; manifest: Record<string, unknown>; listing?: Record<string, unknown> | null }): Promise<SourceView> {
    const body: Record<string, unknown> = { agent_id: input.agentId, manifest: input.manifest }
    if (input.listing !== undefined) body.listing = input.listing
    return this.#call('create source', 'POST', '/v1/byo/sources', body)
  }

  getSource(sourceId: string): Promise<SourceView> {
    return this.#call('get source', 'GET', `/v1/byo/sources/${enc(sourceId)}`)
  }

  /** Registers a public key as pending: a `CreatorKey`, or its `public_key` text (base64, base64url or a PEM public key). */
  registerKey(sourceId: string, key: CreatorKey | string): Promise<KeyView> {
    const publicKey = typeof key === 'string' ? key : key.publicKey
    return this.#call('register key', 'POST', `/v1/byo/sources/${enc(sourceId)}/keys`, { public_key: publicKey })
  }

  async listKeys(sourceId: string): Promise<KeyView[]> {
    return (await this.#page<KeyView>('list keys', `/v1/byo/sources/${enc(sourceId)}/keys`, {})).items
  }

  /** Pending (with its test signal accepted) to active; the previous active key enters its grace period. */
  promoteKey(sourceId: string, keyId: string): Promise<KeyView> {
    return this.#call('promote key', 'POST', `/v1/byo/sources/${enc(sourceId)}/keys/${enc(keyId)}/promote`)
  }

  /** Refused from now on; answered once no push under the key can still be accepted. */
  revokeKey(sourceId: string, keyId: string): Promise<KeyView> {
    return this.#call('revoke key', 'POST', `/v1/byo/sources/${enc(sourceId)}/keys/${enc(keyId)}/revoke`)
  }

  /** The source's refused pushes, newest first. */
  listIngestErrors(sourceId: string, page: { limit?: number; cursor?: string } = {}): Promise<Page<IngestErrorView>> {
    return this.#page('list ingest errors', `/v1/byo/sources/${enc(sourceId)}/ingest-errors`, page)
  }

  /**
   * Whether the gateway holds an accepted signal under this id: after a push that gave up
   * at its deadline, this says whether an attempt got through. A `CreatorApiError` with
   * status 404 when it does not (or accepted it longer ago than it remembers).
   */
  getSignal(sourceId: string, signalId: string): Promise<SignalView> {
    return this.#call('get signal', 'GET', `/v1/byo/sources/${enc(sourceId)}/signals/${enc(signalId)}`)
  }

  /** A client that pushes this source's signals with this key. */
  sourceClient(options: { sourceId: string; keyId: string; key: CreatorKey; retry?: RetryOptions }): SourceClient {
    return new SourceClient({ gatewayUrl: this.#gatewayUrl, fetch: this.#fetch, ...options })
  }

  /**
   * A new source with its first key, ready to push: create the source under the agent,
   * register the key (pending), push the test signal with it, promote it.
   */
  async onboardSource(input: OnboardSourceInput): Promise<OnboardedSource> {
    const source = await this.createSource({ agentId: input.agentId, manifest: input.manifest, ...(input.listing === undefined ? {} : { listing: input.listing }) })
    const added = await this.addKey({ sourceId: source.source_id, key: input.key, testSignal: input.testSignal, ...(input.retry === undefined ? {} : { retry: input.retry }) })
    return { source, ...added }
  }

  /** Key rotation, or a source's first key: register (pending), test signal, promote. */
  async addKey(input: AddKeyInput): Promise<Omit<OnboardedSource, 'source'>> {
    const { key_id: keyId } = await this.registerKey(input.sourceId, input.key)
    const client = this.sourceClient({ sourceId: input.sourceId, keyId, key: input.key, ...(input.retry === undefined ? {} : { retry: input.retry }) })
    const testAccepted = await client.push({ ts: new Date().toISOString(), ...input.testSignal, source_id: input.sourceId })
    if (testAccepted.test !== true) {
      // Only a pending key's signals are tests; a reused signal_id is answered from an earlier push.
      throw new CreatorApiError('test signal', 202, { error: { code: 'not_a_test', message: 'the test signal was answered as a signal accepted before; use a new signal_id' } })
    }
    await this.promoteKey(input.sourceId, keyId)
    return { keyId, testAccepted, client }
  }

  #call<T>(step: string, method: string, path: string, body?: unknown): Promise<T> {
    return this.#api.call(step, method, path, body)
  }

  #page<T>(step: string, path: string, page: { limit?: number; cursor?: string }): Promise<Page<T>> {
    return this.#api.page(step, path, page)
  }
}

const enc = encodeURIComponent
