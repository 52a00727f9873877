/**
 * The signed-in token, kept in this tab's sessionStorage only: it survives a reload of the
 * tab and is gone when the tab closes. Never localStorage (shared by every tab and kept
 * on disk for good) and never a cookie (sent with every request, readable by the server's
 * logs and proxies): the page hands it over in an Authorization header only.
 */
const KEY = 'sgw.dashboard.token'

export const tabToken = {
  get: (): string | null => sessionStorage.getItem(KEY),
  set: (token: string): void => sessionStorage.setItem(KEY, token),
  clear: (): void => sessionStorage.removeItem(KEY),
}
