import type { SignedPush } from './signed-push.js'

/**
 * Plain HTTP to the gateway for the tests and the benchmark: any method, any token (the
 * admin's included), any body, the answer parsed. Creators use the SDK (sdk/) instead.
 */

export interface GatewayResponse<T = any> {
  readonly status: number
  readonly headers: Headers
  readonly body: T
}

export async function apiRequest<T = any>(
  baseUrl: string,
  method: string,
  path: string,
  options: { token?: string; body?: unknown; headers?: Record<string, string>; rawBody?: Uint8Array } = {},
): Promise<GatewayResponse<T>> {
  const headers: Record<string, string> = { ...options.headers }
  if (options.token !== undefined) headers['authorization'] = `Bearer ${options.token}`
  let body: string | Uint8Array<ArrayBuffer> | undefined = options.rawBody === undefined ? undefined : new Uint8Array(options.rawBody)
  if (options.body !== undefined) {
    body = JSON.stringify(options.body)
    headers['content-type'] ??= 'application/json'
  }
  const res = await fetch(baseUrl.replace(/\/+$/, '') + path, { method, headers, body })
  const text = await res.text()
  return { status: res.status, headers: res.headers, body: (text === '' ? undefined : JSON.parse(text)) as T }
}

/** Sends a push built by `signPush`, byte for byte. */
export function sendSigned(baseUrl: string, signed: SignedPush): Promise<GatewayResponse> {
  return apiRequest(baseUrl, 'POST', signed.path, { headers: signed.headers, rawBody: signed.body })
}
