import { tabToken } from './session.js'

/** An answer other than 2xx, with the API's stable error code. */
export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message)
    this.name = 'ApiFailure'
  }
}

export interface Page<T> {
  readonly data: T
  readonly next_cursor?: string | null
}

/** Query parameters: empty and undefined values are left out. */
export function withQuery(path: string, query: Record<string, string | number | undefined> = {}): string {
  const q = new URLSearchParams()
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== '') q.set(k, String(v))
  const s = q.toString()
  return s === '' ? path : `${path}?${s}`
}

function authorization(): Record<string, string> {
  const token = tabToken.get()
  return token === null ? {} : { authorization: `Bearer ${token}` }
}

async function failureOf(res: Response): Promise<ApiFailure> {
  let code = `http_${res.status}`
  let message = res.statusText
  try {
    const body = (await res.json()) as { error?: { code?: string; message?: string } }
    code = body.error?.code ?? code
    message = body.error?.message ?? message
  } catch {
    // Not a JSON error body: the status says what is known.
  }
  return new ApiFailure(res.status, code, message)
}

/** One JSON request to this origin's API, with the tab's token in the Authorization header. */
export async function api<T = unknown>(method: string, path: string, body?: unknown): Promise<Page<T>> {
  const headers: Record<string, string> = { ...authorization() }
  if (body !== undefined) headers['content-type'] = 'application/json'
  const res = await fetch(path, { method, headers, ...(body !== undefined && { body: JSON.stringify(body) }), credentials: 'omit', cache: 'no-store' })
  if (!res.ok) throw await failureOf(res)
  if (res.status === 204) return { data: undefined as T }
  return (await res.json()) as Page<T>
}

/** A text answer (the metrics page). */
export async function apiText(path: string): Promise<string> {
  const res = await fetch(path, { headers: authorization(), credentials: 'omit', cache: 'no-store' })
  if (!res.ok) throw await failureOf(res)
  return res.text()
}

/** A file answer (an export), as a Blob and the name the server gave it. */
export async function apiFile(path: string): Promise<{ blob: Blob; name: string | undefined }> {
  const res = await fetch(path, { headers: authorization(), credentials: 'omit', cache: 'no-store' })
  if (!res.ok) throw await failureOf(res)
  const name = /filename="?([^";]+)"?/.exec(res.headers.get('content-disposition') ?? '')?.[1]
  return { blob: await res.blob(), name }
}
