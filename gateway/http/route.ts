import type { Logger } from 'pino'
import { ApiError } from '../../schemas/index.js'
import { Reply } from './reply.js'
import { nextRequestId } from './request-id.js'
import type { HttpRequest, HttpResponse, TemplatedApp } from './uws.js'

export type RouteHandler = (reply: Reply, req: HttpRequest, res: HttpResponse) => void

/**
 * Registers a handler on the uWS app, with its Reply made for it (bodiless for a HEAD
 * request). uWS calls handlers straight from its event loop, where nothing above would
 * catch a throw: the process would end, every client with it. Here a synchronous throw
 * is logged and answered `500 internal_error` for that request alone, and the
 * connection closed, since the handler may have left the body unread.
 */
export function route(app: TemplatedApp, method: 'get' | 'head' | 'post' | 'patch' | 'put' | 'del' | 'any', pattern: string, logger: Logger, handler: RouteHandler): void {
  app[method](pattern, (res: HttpResponse, req: HttpRequest) => {
    const head = method === 'head' || (method === 'any' && req.getMethod() === 'head')
    const reply = new Reply(res, nextRequestId(), head)
    try {
      handler(reply, req, res)
    } catch (err) {
      logger.error({ request_id: reply.requestId, err }, 'request handler failed')
      try {
        reply.fail(new ApiError('internal_error', 'internal error; retry later'), true)
      } catch {
        // The response was ended or given up on before the throw: nothing is left to answer.
      }
    }
  })
}
