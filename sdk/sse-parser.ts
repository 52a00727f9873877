/** One server-sent event as the stream framed it. */
export interface SseMessage {
  /** `event:`, or `message` when the event named none. */
  readonly event: string
  readonly data: string
  /** The last `id:` seen so far on the stream (ids carry over to later events, as in EventSource). */
  readonly id: string | undefined
}

/**
 * The `text/event-stream` format as the HTML standard's EventSource reads it: lines end
 * with CRLF, LF or CR; `field: value` lines (one space after the colon dropped); `:` lines
 * are comments (the gateway's `: ping`); a blank line dispatches the event; several
 * `data:` lines are joined with LF. `retry:` sets the reconnection delay. Text is fed in
 * any pieces: a line split across network chunks is kept until its end comes.
 */
export class SseParser {
  #buffer = ''
  #pendingCr = false
  #event = ''
  #data: string[] = []
  #id: string | undefined
  /** The last `retry:` the stream sent, in ms. */
  retryMs: number | undefined

  constructor(lastEventId?: string) {
    this.#id = lastEventId
  }

  /** The events completed by this piece of text. */
  push(text: string): SseMessage[] {
    const out: SseMessage[] = []
    let s = this.#buffer + text
    // A CR ending the previous piece already ended its line: an LF that starts this one is its pair.
    if (this.#pendingCr && s.startsWith('\n')) s = s.slice(1)
    this.#pendingCr = false
    let start = 0
    for (let i = 0; i < s.length; i++) {
      const c = s[i]
      if (c !== '\n' && c !== '\r') continue
      this.#line(s.slice(start, i), out)
      if (c === '\r') {
        if (i + 1 === s.length) this.#pendingCr = true
        else if (s[i + 1] === '\n') i++
      }
      start = i + 1
    }
    this.#buffer = s.slice(start)
    return out
  }

  #line(line: string, out: SseMessage[]): void {
    if (line === '') {
      if (this.#data.length > 0) out.push({ event: this.#event === '' ? 'message' : this.#event, data: this.#data.join('\n'), id: this.#id })
      this.#event = ''
      this.#data = []
      return
    }
    if (line.startsWith(':')) return
    const colon = line.indexOf(':')
    const field = colon < 0 ? line : line.slice(0, colon)
    let value = colon < 0 ? '' : line.slice(colon + 1)
    if (value.startsWith(' ')) value = value.slice(1)
    if (field === 'event') this.#event = value
    else if (field === 'data') this.#data.push(value)
    else if (field === 'id' && !value.includes('\0')) this.#id = value
    else if (field === 'retry' && /^[0-9]+$/.test(value)) this.retryMs = Number(value)
  }
}
