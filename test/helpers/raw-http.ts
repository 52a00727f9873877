import { connect } from 'node:net'

export interface RawResponse {
  readonly status: number
  readonly headers: Record<string, string>
  readonly body: any
  /** True when the server closed the connection after answering. */
  readonly closed: boolean
}

/**
 * Writes raw bytes to the gateway and reads one response, for the framing cases
 * that fetch will not produce (duplicate Content-Length, chunking, slow bodies, bad UTF-8).
 * `chunks` are written `gapMs` apart, from `localAddress` (any of 127.0.0.0/8, which
 * Linux routes to the loopback). After a complete answer it waits `closeWaitMs` (100) to
 * see whether the server closes the connection (`closed`); a caller that does not look at
 * `closed` passes 0 and is not kept waiting on every kept-alive connection.
 */
export function rawRequest(port: number, chunks: Array<string | Buffer>, options: { gapMs?: number; timeoutMs?: number; localAddress?: string; closeWaitMs?: number } = {}): Promise<RawResponse | undefined> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1', localAddress: options.localAddress ?? '127.0.0.1' })
    let data = Buffer.alloc(0)
    let closed = false
    let settled = false
    const finish = () => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      socket.destroy()
      resolve(parse(data, closed))
    }
    const timer = setTimeout(finish, options.timeoutMs ?? 3000)
    socket.on('error', (err) => (settled ? undefined : data.length > 0 ? finish() : reject(err)))
    socket.on('data', (d: Buffer) => {
      data = Buffer.concat([data, d])
      const parsed = parse(data, false)
      // A complete response with a body: wait a moment to see whether the server closes.
      if (parsed !== undefined) setTimeout(finish, options.closeWaitMs ?? 100)
    })
    socket.on('close', () => {
      closed = true
      finish()
    })
    socket.on('connect', async () => {
      for (const chunk of chunks) {
        if (socket.destroyed) return
        socket.write(chunk)
        if (options.gapMs) await new Promise((r) => setTimeout(r, options.gapMs))
      }
    })
  })
}

function parse(data: Buffer, closed: boolean): RawResponse | undefined {
  const text = data.toString('latin1')
  const end = text.indexOf('\r\n\r\n')
  if (end < 0) return undefined
  const [statusLine, ...lines] = text.slice(0, end).split('\r\n')
  const headers: Record<string, string> = {}
  for (const line of lines) {
    const i = line.indexOf(':')
    headers[line.slice(0, i).toLowerCase()] = line.slice(i + 1).trim()
  }
  const length = Number(headers['content-length'] ?? 0)
  const body = data.subarray(Buffer.byteLength(text.slice(0, end + 4), 'latin1'))
  if (body.length < length) return undefined
  const bodyText = body.subarray(0, length).toString('utf8')
  return { status: Number(statusLine?.split(' ')[1]), headers, body: bodyText === '' ? undefined : JSON.parse(bodyText), closed }
}

/** A request head with the given headers (in order, repeats allowed) and body. */
export function requestBytes(path: string, headers: Array<[string, string]>, body: Buffer | string): Buffer {
  const head = [`POST ${path} HTTP/1.1`, 'Host: 127.0.0.1', ...headers.map(([k, v]) => `${k}: ${v}`)].join('\r\n')
  return Buffer.concat([Buffer.from(`${head}\r\n\r\n`, 'latin1'), typeof body === 'string' ? Buffer.from(body) : body])
}

/**
 * A PROXY protocol v2 header (the binary one, which uWebSockets.js reads) for a TCP
 * connection from `source` (4 or 16 bytes) to the gateway, as a load balancer sends it
 * before the client's first byte.
 */
export function proxyV2Header(source: Buffer): Buffer {
  const signature = Buffer.from('0d0a0d0a000d0a515549540a', 'hex')
  const v4 = source.length === 4
  const destination = Buffer.alloc(source.length)
  const ports = Buffer.from([0xc3, 0x50, 0x1f, 0x90])
  const addresses = Buffer.concat([source, destination, ports])
  // Version 2, command PROXY; TCP over IPv4 (0x11) or IPv6 (0x21); the length of what follows.
  return Buffer.concat([signature, Buffer.from([0x21, v4 ? 0x11 : 0x21, 0, addresses.length]), addresses])
}
