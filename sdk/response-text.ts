import { GatewaySdkError } from './errors.js'

/**
 * An answer's body as text, read up to `maxBytes`: the gateway's answers are small (an
 * ingest answer under 1 kB, a list page under a few hundred kB), and a proxy or server
 * that streams without end must not fill the creator's memory.
 */
export async function responseText(res: Response, maxBytes: number): Promise<string> {
  if (res.body === null) return ''
  const reader = res.body.getReader()
  const decoder = new TextDecoder()
  let size = 0
  let text = ''
  for (;;) {
    const { done, value } = await reader.read()
    if (done) return text + decoder.decode()
    size += value.byteLength
    if (size > maxBytes) {
      await reader.cancel().catch(() => undefined)
      throw new GatewaySdkError('response_too_large', `the answer is larger than ${maxBytes} bytes`)
    }
    text += decoder.decode(value, { stream: true })
  }
}
